// Built-in hook faq_cache: answers a question asked before in this template from the state store.
// Keys (state scope "agent", so one cache per template):
//   "<name>:q:<question>" -> {answer, at}    one answer; <question> is the normalised text
//   "<name>:order"        -> set of questions, oldest first (state sets keep the order of adding)
// Every question's key starts "<name>:q:", which neither the order key nor another hook's key
// does (a hook's name holds no ":"), so no message can name them.

// The question as a key: the text the LLM is sent, with only what does not change its meaning
// folded: Unicode's canonical composition (NFC: one "й" however typed), case, ё as е, each run of
// white space as one space, and the marks ending the sentence (? ! . … and their kin in other
// scripts). Everything else stays: "1000-1?" and "1000+1?" are two questions.
function normalise(text) {
    return text.normalize("NFC").toLowerCase().replace(/ё/g, "е")
        .replace(/\s+/gu, " ").replace(SENTENCE_END, "").trim();
}

const SENTENCE_END = /[\s\p{Sentence_Terminal}\u2026]+$/u;

// What a reader does not see and the LLM reads: control and format characters (bidi controls,
// zero-width ones, the tag characters U+E0000…), private-use, unassigned and surrogate code
// points, and the default-ignorable ones (variation selectors, fillers, …). Instructions can
// hide there, so a message holding any is neither answered from the cache nor kept in it: its
// key would leave out what steered the answer. Tabs and line breaks are white space.
const HIDDEN = /[\0-\x08\x0B\x0C\x0E-\x1F\x7F-\x9F\p{Cf}\p{Co}\p{Cn}\p{Cs}\p{Default_Ignorable_Code_Point}\p{Variation_Selector}]/u;

// A setting of faq_cache.yaml, checked: a typo there should say so, not turn the cache off.
function setting(ctx, name, type) {
    const value = ctx.config[name];
    if (typeof value !== type || (type === "number" && !(value > 0))) {
        throw new Error(`${ctx.config.name}.yaml: ${name} must be a ${type}${type === "number" ? " > 0" : ""}, got ${JSON.stringify(value)}`);
    }
    return value;
}

// The message's key, or null when it is not one the cache keeps.
function questionOf(ctx, msg) {
    if (ctx.template === null || !msg || typeof msg.content !== "string") return null;  // no cache to use
    if (msg.content.length > setting(ctx, "max_question_chars", "number")) return null;
    if (HIDDEN.test(msg.content)) return null;
    const question = normalise(msg.content);
    // a state key is at most 1024 bytes: max_question_chars of CJK or of emoji may be more
    if (!question || utf8Bytes(entryKey(ctx, question)) > MAX_KEY_BYTES) return null;
    return question;
}

const MAX_KEY_BYTES = 1024;  // the state store's bound on a key (scripts.md 8.8)

function utf8Bytes(text) {
    let bytes = 0;
    for (const ch of text) {
        const code = ch.codePointAt(0);
        bytes += code < 0x80 ? 1 : code < 0x800 ? 2 : code < 0x10000 ? 3 : 4;
    }
    return bytes;
}

const entryKey = (ctx, question) => `${ctx.config.name}:q:${question}`;
const orderKey = (ctx) => `${ctx.config.name}:order`;

function before_user_message(ctx, msg) {
    if (ctx.earlier) return;  // a client's earlier message, not being answered (a reply would block)
    const question = questionOf(ctx, msg);
    if (question === null) return;
    const entry = state_get("agent", entryKey(ctx, question));
    if (entry === null || typeof entry.answer !== "string") return;
    if (!(Date.now() - entry.at <= setting(ctx, "ttl_secs", "number") * 1000)) return;  // expired
    return { reply: entry.answer, notice: setting(ctx, "notice", "string") };
}

// Whether the answer is the question's alone, from what the kernel says of the turn (ctx.turn).
function keepable(ctx, answer) {
    const turn = ctx.turn;
    if (!turn || turn.reason !== "job_done" || turn.replied_by_hook) return false;  // failed, or no LLM
    if (turn.tool_calls > 0 && !setting(ctx, "cache_tool_turns", "boolean")) return false;
    if (turn.injected_messages > 0) return false;  // e.g. memory's facts: the answer is this user's
    if (turn.subagent) return false;  // a script's task, with the tools the script chose
    if (turn.history_messages > 0 && setting(ctx, "only_first_message", "boolean")) return false;
    return answer !== null && typeof answer.content === "string" && answer.content.trim() !== ""
        && answer.content.length <= setting(ctx, "max_answer_chars", "number");
}

function after_turn(ctx, question, answer) {
    const key = questionOf(ctx, question);
    if (key === null || !keepable(ctx, answer)) return;
    state_set("agent", entryKey(ctx, key), { answer: answer.content, at: Date.now() });
    state_srem("agent", orderKey(ctx), key);  // asked again after it expired: now the newest
    state_sadd("agent", orderKey(ctx), key);
    const order = state_smembers("agent", orderKey(ctx));
    const extra = order.length - setting(ctx, "max_entries", "number");
    for (const old of order.slice(0, Math.max(0, extra))) {
        state_delete("agent", entryKey(ctx, old));
        state_srem("agent", orderKey(ctx), old);
    }
}
