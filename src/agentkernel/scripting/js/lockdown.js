// Run once in a context that calls reuse (reuse.py), after prelude.js: it makes the builtins
// keep their shape, and returns what the host needs to run a call in the context and to know
// afterwards whether the call left anything behind.
//
// Every object reachable from the global object and the hidden intrinsics (iterator and
// generator prototypes, %ThrowTypeError%) is sealed: no property can be added, deleted or
// redefined, and no prototype changed. A builtin can still be replaced for the length of a call
// (`Array.prototype.includes = f`); the check after the call compares every writable value with
// the one it had, and a context that differs is thrown away. The global object stays open (a
// script may set a global), its own properties fixed: after a call, any new global, any changed
// one, any change of its prototype or extensibility throws the context away too. What a seal and
// a value cannot show is watched as it happens: a `defineProperty` or `freeze` of a builtin (a
// writable property made read-only), and a FinalizationRegistry (its callbacks would run in a
// later call). The host adds: jobs left pending, an import, any error.
// It is compiled without its comment lines and indentation (engine.py `_prelude_source`).
(function (g) {
  "use strict";
  const getProto = Object.getPrototypeOf;
  const ownKeys = Reflect.ownKeys;
  const getDesc = Object.getOwnPropertyDescriptor;
  const defineProp = Object.defineProperty;
  const isExtensible = Object.isExtensible;
  const seal = Object.seal;
  const apply = Reflect.apply;
  const construct = Reflect.construct;
  const reach = [
    getProto([][Symbol.iterator]()),
    getProto(function* () {}),
    getProto(async function () {}),
    getProto(async function* () {}),
    getProto(new Map().entries()),
    getProto(new Set().values()),
    getProto(""[Symbol.iterator]()),
    getProto(/a/[Symbol.matchAll]("")),
    getProto([].values().map((x) => x)),
    getProto(Iterator.from({ next() {} })),
    (function () {
      return getDesc(arguments, "callee").get;
    })(),
  ];

  let dirty = false;
  const touches = (target) => {
    if (target === g || builtins.has(target)) dirty = true;
  };
  const watched = {
    apply(original, self, args) {
      touches(args[0]);
      return apply(original, self, args);
    },
  };
  for (const [holder, name] of [
    [Object, "defineProperty"], [Object, "defineProperties"], [Reflect, "defineProperty"], [Object, "freeze"],
  ]) {
    holder[name] = new Proxy(holder[name], watched);
  }
  const Registry = g.FinalizationRegistry;
  const registry = new Proxy(Registry, {
    construct(original, args, target) {
      dirty = true;
      return construct(original, args, target);
    },
  });
  defineProp(Registry.prototype, "constructor", { value: registry });
  g.FinalizationRegistry = registry;

  // Seal everything reachable; keep each writable value to compare after a call.
  const builtins = new Set();
  const todo = [];
  const visit = (v) => {
    if (v !== null && (typeof v === "object" || typeof v === "function") && v !== g && !builtins.has(v)) {
      builtins.add(v);
      todo.push(v);
    }
  };
  const holders = [];
  const keys = [];
  const values = [];
  const keep = (holder, key, d) => {
    if (!("value" in d)) {
      visit(d.get);
      visit(d.set);
      return;
    }
    visit(d.value);
    if (d.writable) {
      holders.push(holder);
      keys.push(key);
      values.push(d.value);
    }
  };
  for (const v of reach) visit(v);
  visit(getProto(g));
  const globals = ownKeys(g).filter((k) => k !== "module" && k !== "exports");
  for (const k of globals) {
    const d = getDesc(g, k);
    keep(g, k, d);
    if (d.configurable) defineProp(g, k, { configurable: false });
  }
  while (todo.length > 0) {
    const o = todo.pop();
    visit(getProto(o));
    for (const k of ownKeys(o)) keep(o, k, getDesc(o, k));
    seal(o);
  }
  const globalCount = ownKeys(g).length;
  const globalProto = getProto(g);
  // The comparison as code with each key spelled out (`h3.map !== V[41]`): QuickJS reads a named
  // property several times faster than one keyed by a string held in an array.
  const places = [];
  const placed = new Map();
  const symbols = [];
  const lines = [];
  for (let i = 0; i < holders.length; i++) {
    let h = placed.get(holders[i]);
    if (h === undefined) placed.set(holders[i], (h = places.push(holders[i]) - 1));
    const key = keys[i];
    const at =
      typeof key === "symbol"
        ? `[S[${symbols.push(key) - 1}]]`
        : /^[A-Za-z_$][\w$]*$/.test(key)
          ? `.${key}`
          : `[${JSON.stringify(key)}]`;
    lines.push(`if (h${h}${at} !== V[${i}]) return false;`);
  }
  const locals = places.map((_, h) => `h${h} = H[${h}]`).join(", ");
  const same = new Function("H", "V", "S", `"use strict"; const ${locals};\n${lines.join("\n")}\nreturn true;`);

  // `begin()` before the script's top level runs: fresh `module` and `exports`, nothing seen yet.
  const begin = () => {
    dirty = false;
    g.module = { exports: {} };
    g.exports = g.module.exports;
  };
  // `lookup(find, name)`: a `module.exports` entry, else what the script's own `find` (engine.py
  // `_wrapped`) sees by that name, else a global of a name that is no identifier.
  const lookup = (find, name, identifier) => {
    const m = g.module;
    const e = m !== null && typeof m === "object" ? m.exports : undefined;
    const own = e !== null && typeof e === "object" ? e[name] : undefined;
    if (typeof own === "function") return own;
    const found = identifier ? find(name) : g[name];
    return typeof found === "function" ? found : undefined;
  };
  const plain = (name) => {
    const d = getDesc(g, name);
    return d !== undefined && "value" in d && d.writable && d.configurable;
  };
  // Whether the context is as `begin` left it, but for the values of `module` and `exports`.
  const clean = () => {
    if (dirty || !isExtensible(g) || getProto(g) !== globalProto || ownKeys(g).length !== globalCount) {
      return false;
    }
    if (!plain("module") || !plain("exports")) return false;
    return same(places, values, symbols);
  };
  return [begin, lookup, clean];
})(globalThis);
