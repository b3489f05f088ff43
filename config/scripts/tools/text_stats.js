// Counts characters, words and sentences; text_stats.rhai counts the same way.
// Whitespace is Unicode's White_Space, the set Rhai's split() uses.
const SPACES = /[\t\n\v\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+/;
const SENTENCE_ENDS = ".!?…";
const SURROGATE_PAIRS = /[\uD800-\uDBFF][\uDC00-\uDFFF]/g;
const NOT_AN_END = /[^.!?…]/; // a word with anything but sentence ends in it

function run(args) {
    const text = args.text ?? "";
    const words = text.split(SPACES).filter((w) => w.length > 0);
    if (words.length === 0) {
        return { content: "текст пуст", success: false, error: "empty text" };
    }
    // A word ending in . ! ? or … ends a sentence; the last sentence needs no such word.
    let sentences = 0;
    let open = false;
    for (const word of words) {
        if (NOT_AN_END.test(word)) open = true;
        if (open && SENTENCE_ENDS.includes(word.at(-1))) {
            sentences += 1;
            open = false;
        }
    }
    if (open) sentences += 1;
    const chars = text.length - (text.match(SURROGATE_PAIRS) ?? []).length; // spaces too; an emoji is one
    const content = `Символов: ${chars}, слов: ${words.length}, предложений: ${sentences}`;
    return { content, success: true };
}
