// Built-in state_tool: one state_* helper per operation (docs/scripts.md 8.8).
// The kernel takes the scope's id from the caller (S11.2), so whatever the
// LLM writes, it reaches only this user's keys in `session` and `user`.

const SCOPES = ["session", "user", "agent", "global"];

// op → [the helper, the arguments it needs after (scope, key), how to name its result]
const OPS = {
    get: [state_get, [], "value"],
    set: [state_set, ["value"], null],
    delete: [state_delete, [], "deleted"],
    keys: [state_keys, null, "keys"], // no key: the whole scope
    push: [state_push, ["value"], "length"],
    range: [state_range, ["start", "stop"], "items"],
    sadd: [state_sadd, ["value"], "added"],
    smembers: [state_smembers, [], "members"],
    srem: [state_srem, ["value"], "removed"],
};

function failed(text) {
    return { success: false, error: text };
}

// The scopes this tool's YAML opens (`scopes:`), checked so a typo there is loud.
function openScopes(config) {
    const open = config.scopes ?? ["session", "user"];
    if (!Array.isArray(open) || open.length === 0 || open.some((s) => !SCOPES.includes(s))) {
        throw new Error(`${config.name}.yaml: scopes must be a non-empty list of ${SCOPES.join(", ")}; got ${JSON.stringify(open)}`);
    }
    return open;
}

function run(args, config) {
    if (!Object.prototype.hasOwnProperty.call(OPS, args.op)) {
        return failed(`unknown operation ${JSON.stringify(args.op)}; the operations are: ${Object.keys(OPS).join(", ")}`);
    }
    const open = openScopes(config);
    const scope = args.scope ?? open[0];
    if (!open.includes(scope)) {
        return failed(`scope ${JSON.stringify(scope)} is not open to this tool; use one of: ${open.join(", ")}`);
    }
    const [helper, needs, answer] = OPS[args.op];
    const defaults = { start: 0, stop: -1 };
    const rest = [];
    if (needs !== null) {
        if (typeof args.key !== "string" || args.key === "") return failed(`${args.op} needs \`key\``);
        rest.push(args.key);
        for (const name of needs) {
            if (!(name in args) && !(name in defaults)) return failed(`${args.op} needs \`${name}\``);
            rest.push(name in args ? args[name] : defaults[name]);
        }
    }
    try {
        const result = helper(scope, ...rest);
        return answer === null ? { ok: true } : { [answer]: result };
    } catch (e) {
        return failed(e.message); // e.g. "state_get: scope 'session' has no id for this caller"
    }
}
