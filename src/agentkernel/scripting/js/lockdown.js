// Run once in a context that calls reuse (reuse.py), after prelude.js: it records the shape of the
// builtins, and returns what the host needs to run a call in the context and to know afterwards
// whether the call left anything behind.
//
// The builtins stay open as in a fresh context: a call may add, replace or delete a property of a
// constructor, a prototype, a namespace or the global object (a polyfill, `String.prototype.
// capitalize = f`, works on its first call). The check after the call finds any such change, and a
// context that differs is thrown away. Only the builtin functions that construct nothing (methods,
// getters, the helpers) are frozen, which spares the check most of its objects. It watches every
// object reachable from the global object and the hidden intrinsics (iterator and generator
// prototypes, %ThrowTypeError%), and the global object:
// - a property added by assignment (a class field of an object a base constructor returned, an
//   array method) is enumerable, and no builtin has an enumerable property but those of
//   `Array.prototype[Symbol.unscopables]`: one `Object.assign` of every other builtin onto an
//   empty object must copy nothing, and that one keeps its key list;
// - the global object keeps its enumerable names in their order (one deleted and set again comes
//   last), its symbols and which of them are enumerable;
// - every writable value is compared with the one it had;
// - a deleted property reads differently (what its prototype gives, or undefined) or, where that
//   could be the same and for an accessor, `Object.hasOwn` misses it;
// - what an assignment cannot do is watched as it happens: `defineProperty`, `defineProperties`,
//   `__defineGetter__`, `__defineSetter__` (a property made read-only, hidden or an accessor),
//   `setPrototypeOf` and the `__proto__` setter, `freeze`, `seal` and `preventExtensions` of a
//   builtin or the global object, and a FinalizationRegistry (its callbacks would run in a later
//   call).
// The host adds: jobs left pending, an import, a limit that stopped the call.
// It is compiled without its comment lines and indentation (engine.py `_prelude_source`).
(function (g) {
  "use strict";
  const getProto = Object.getPrototypeOf;
  const ownKeys = Reflect.ownKeys;
  const getDesc = Object.getOwnPropertyDescriptor;
  const defineProp = Object.defineProperty;
  const isExtensible = Object.isExtensible;
  const keysOf = Object.keys;
  const getSymbols = Object.getOwnPropertySymbols;
  const create = Object.create;
  const assign = Object.assign;
  const hasOwn = Object.hasOwn;
  const isEnumerable = Object.prototype.propertyIsEnumerable;
  const apply = Reflect.apply;
  const freeze = Object.freeze;
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

  // The calls that change a builtin beyond what the check below can see, each marking the context
  // changed when its target (first argument, or `this`) is a builtin or the global object.
  let dirty = false;
  const touches = (target) => {
    if (target === g || builtins.has(target)) dirty = true;
  };
  const onFirst = {
    apply(original, self, args) {
      touches(args[0]);
      return apply(original, self, args);
    },
  };
  const onThis = {
    apply(original, self, args) {
      touches(self);
      return apply(original, self, args);
    },
  };
  const OP = Object.prototype;
  for (const [holder, name, handler] of [
    [Object, "defineProperty", onFirst],
    [Object, "defineProperties", onFirst],
    [Reflect, "defineProperty", onFirst],
    [Object, "freeze", onFirst],
    [Object, "seal", onFirst],
    [Object, "preventExtensions", onFirst],
    [Reflect, "preventExtensions", onFirst],
    [Object, "setPrototypeOf", onFirst],
    [Reflect, "setPrototypeOf", onFirst],
    [OP, "__defineGetter__", onThis],
    [OP, "__defineSetter__", onThis],
  ]) {
    holder[name] = new Proxy(holder[name], handler);
  }
  const protoAccessor = getDesc(OP, "__proto__");
  defineProp(OP, "__proto__", { set: new Proxy(protoAccessor.set, onThis) });
  const Registry = g.FinalizationRegistry;
  const registry = new Proxy(Registry, {
    construct(original, args, target) {
      dirty = true;
      return construct(original, args, target);
    },
  });
  defineProp(Registry.prototype, "constructor", { value: registry });
  g.FinalizationRegistry = registry;

  // Walk everything reachable; note what to compare after a call.
  const builtins = new Set();
  const todo = [];
  const visit = (v) => {
    if (v !== null && (typeof v === "object" || typeof v === "function") && v !== g && !builtins.has(v)) {
      builtins.add(v);
      todo.push(v);
    }
  };
  const UNKNOWN = {};
  // What `holder[key]` would read were its own property deleted (UNKNOWN: a getter would run).
  const inherited = (holder, key) => {
    for (let p = getProto(holder); p !== null; p = getProto(p)) {
      const d = getDesc(p, key);
      if (d !== undefined) return "value" in d ? d.value : UNKNOWN;
    }
    return undefined;
  };
  const lines = [];
  const places = [];
  const placed = new Map();
  const symbols = [];
  const values = [];
  const at = (holder, key) => {
    let h = placed.get(holder);
    if (h === undefined) placed.set(holder, (h = places.push(holder) - 1));
    const name = typeof key === "symbol" ? `S[${symbols.push(key) - 1}]` : JSON.stringify(key);
    const member =
      typeof key === "symbol"
        ? `h${h}[${name}]`
        : /^[A-Za-z_$][\w$]*$/.test(key)
          ? `h${h}.${key}`
          : `h${h}[${name}]`;
    return [`h${h}`, name, member];
  };
  // A string or a finite number as its literal (QuickJS reads a constant faster than `V[i]`).
  const literal = (v) =>
    typeof v === "string" || (typeof v === "number" && Number.isFinite(v))
      ? JSON.stringify(v)
      : `V[${values.push(v) - 1}]`;
  const visitAll = (d) => {
    if ("value" in d) {
      visit(d.value);
    } else {
      visit(d.get);
      visit(d.set);
    }
  };
  // The lines that find a change of `holder[key]`, described by `d`: its value if writable, and
  // whether it is still there if it can be deleted.
  const keep = (holder, key, d) => {
    visitAll(d);
    if (!d.configurable && !d.writable) return;
    const [h, name, member] = at(holder, key);
    if (!("value" in d)) {
      lines.push(`if (!has(${h}, ${name})) return false;`);
      return;
    }
    const v = d.value;
    const comparable = v === v; // NaN is not equal to itself
    if (d.writable) {
      lines.push(
        comparable
          ? `if (${member} !== V[${values.push(v) - 1}]) return false;`
          : `if (${member} === ${member}) return false;`,
      );
    }
    if (!d.configurable) return;
    const after = inherited(holder, key);
    if (!comparable || after === UNKNOWN || after === v) {
      lines.push(`if (!has(${h}, ${name})) return false;`);
    } else if (!d.writable) {
      lines.push(`if (${member} !== ${literal(v)}) return false;`);
    }
  };
  for (const v of reach) visit(v);
  visit(getProto(g));
  for (const k of ownKeys(g)) {
    if (k !== "module" && k !== "exports") keep(g, k, getDesc(g, k));
  }
  // A builtin function that constructs nothing (a method, a getter, a helper) is frozen: a polyfill
  // adds to a constructor, a prototype or a namespace, and checking some 530 functions too would
  // make a JS tool call 1.65x a fresh bare context instead of 1.2x. `Function.prototype` is open.
  const FP = Function.prototype;
  const frozen = (o) => typeof o === "function" && o !== FP && !hasOwn(o, "prototype");
  // Builtins with enumerable properties of their own have their key lists compared; the others
  // are `Object.assign`'s sources.
  const listed = [];
  const listedKeys = [];
  const sources = [null];
  while (todo.length > 0) {
    const o = todo.pop();
    visit(getProto(o));
    const keys = ownKeys(o);
    if (frozen(o)) {
      for (const k of keys) visitAll(getDesc(o, k));
      freeze(o);
      continue;
    }
    let enumerable = false;
    for (const k of keys) {
      const d = getDesc(o, k);
      enumerable = enumerable || d.enumerable;
      keep(o, k, d);
    }
    if (enumerable) {
      listed.push(o);
      listedKeys.push(keys);
    } else {
      sources.push(o);
    }
  }
  const globalProto = getProto(g);
  // The comparison as code with each key spelled out (`h3.map !== V[41]`): QuickJS reads a named
  // property several times faster than one keyed by a string held in an array.
  const locals = places.map((_, h) => `h${h} = H[${h}]`).join(", ");
  const same = new Function(
    "H",
    "V",
    "S",
    "has",
    `"use strict"; const ${locals};\n${lines.join("\n")}\nreturn true;`,
  );
  // Whether two key lists are the same keys in the same order (a key deleted and set again is last).
  const sameList = (keys, was) => {
    if (keys.length !== was.length) return false;
    for (let i = 0; i < was.length; i++) if (keys[i] !== was[i]) return false;
    return true;
  };
  // The global object: a property added by assignment (a sloppy script's undeclared name, a class
  // field of an object returned from a base constructor) is enumerable, and one deleted and set
  // again comes last: its enumerable names in their order, its symbols and which are enumerable.
  const globalNames = keysOf(g);
  const globalSymbols = getSymbols(g);
  const symbolsEnumerable = globalSymbols.map((k) => apply(isEnumerable, g, [k]));
  const sameGlobal = () => {
    if (!isExtensible(g) || getProto(g) !== globalProto) return false;
    const names = keysOf(g);
    if (!sameList(names, globalNames)) return false;
    if (!sameList(getSymbols(g), globalSymbols)) return false;
    for (let i = 0; i < globalSymbols.length; i++) {
      if (apply(isEnumerable, g, [globalSymbols[i]]) !== symbolsEnumerable[i]) return false;
    }
    return true;
  };
  // Whether any builtin but the listed ones has an enumerable own property.
  const noneAdded = () => {
    for (let i = 0; i < listed.length; i++) if (!sameList(ownKeys(listed[i]), listedKeys[i])) return false;
    const sink = create(null);
    sources[0] = sink;
    apply(assign, null, sources);
    sources[0] = null;
    return ownKeys(sink).length === 0;
  };

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
    return d !== undefined && "value" in d && d.writable && d.configurable && d.enumerable;
  };
  // Whether the context is as `begin` left it, but for the values of `module` and `exports`.
  const clean = () => {
    if (dirty || !plain("module") || !plain("exports") || !sameGlobal() || !noneAdded()) return false;
    return same(places, values, symbols, hasOwn);
  };
  return [begin, lookup, clean];
})(globalThis);
