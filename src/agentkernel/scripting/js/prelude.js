// Installed into every fresh QuickJS context before the script runs.
// Binds each helper of the kernel's table as a global function, plus
// console.*/print, and returns the `invoke` function the host calls the
// script's entry point through. HELPER_NAMES is replaced by a JSON array.
// It is compiled without its comment lines and indentation (engine.py
// `_prelude_source`): no string in it may span lines.
(function (g, names) {
  "use strict";
  const call = g.__ak_call;
  const log = g.__ak_log;
  delete g.__ak_call;
  delete g.__ak_log;

  const show = (v) => {
    if (typeof v === "string") return v;
    try {
      const s = JSON.stringify(v);
      return s === undefined ? String(v) : s;
    } catch (e) {
      return String(v);
    }
  };

  // A method named by its computed key: it gets its name as it is made (no
  // second step per helper in every context), and is no constructor.
  const bind = (name) =>
    ({
      [name](...args) {
        let payload;
        try {
          payload = JSON.stringify(args);
        } catch (e) {
          throw new TypeError(name + ": arguments cannot be passed: " + e.message);
        }
        const reply = call(name, payload);
        if (reply.charCodeAt(0) === 101 /* "e" */) throw new Error(reply.slice(1));
        return JSON.parse(reply.slice(1));
      },
    })[name];
  for (const name of names) g[name] = bind(name);

  // The wall clock inside builtins. QuickJS asks the kernel's interrupt
  // handler only every ~10,000 calls and loop turns, and a builtin runs in C
  // without asking: `for (;;) a.includes(5)` on a big array once ran for
  // minutes past timeout_secs. So the builtins whose cost grows with their
  // data first add that size to a count of work, and every WORK_STEP units
  // the kernel reads its clock; past the deadline the script spins until the
  // interrupt handler stops it, which no `catch` can prevent.
  //
  // Each guarded builtin becomes a Proxy of itself whose `apply` trap counts
  // first: one small object per builtin and one shared handler per kind of
  // cost, where a wrapper function would cost a closure and its name per
  // builtin in every fresh context. A Proxy keeps the builtin's own `name`,
  // `length` and `[native code]` text, and is no constructor when it is none.
  const poll = g.__ak_poll;
  delete g.__ak_poll;
  const apply = Reflect.apply;
  const stringSearch = String.prototype.indexOf;
  const stringLastSearch = String.prototype.lastIndexOf;
  const slice = String.prototype.slice;
  const WORK_STEP = 1 << 20;
  const SEARCH_WINDOW = 1 << 24; // characters × pattern length one search may compare
  let work = 0;
  const spend = (units) => {
    work += units;
    if (work >= WORK_STEP) {
      work = 0;
      if (poll()) for (;;);
    }
  };
  const sizeOf = (x) => (x != null && typeof x.length === "number" ? x.length : 0);
  const linear = (self, args) => sizeOf(self) + sizeOf(args[0]);
  const sorting = (self) => sizeOf(self) * (32 - Math.clz32(sizeOf(self)));
  const text = (self, args) => (sizeOf(self) + sizeOf(args[0])) >> 4;

  // Lengths with nothing behind them. A sparse array (`a.length = 2 ** 32 - 1`)
  // or an array-like (`{ length: 2 ** 53 - 1 }`) costs no memory, yet these
  // builtins visit each of its indexes in C, where QuickJS never asks the
  // interrupt handler and Python's lock stays held: one `a.sort()` stopped
  // the whole kernel for minutes, and `indexOf` on the array-like for good.
  // An array's element takes 16 bytes, so no array the script's memory can
  // hold is longer than WALK_LIMIT (a typed array's or a string's length is
  // backed by memory): a longer one is refused before the walk.
  const WALK_LIMIT = g.__ak_walk_limit;
  delete g.__ak_walk_limit;
  const isView = ArrayBuffer.isView;
  const holding = (x) => (x !== null && (typeof x === "object" || typeof x === "function") ? Number(x.length) : 0);
  const checkWalk = (original, x) => {
    const n = holding(x);
    if (n > WALK_LIMIT && !isView(x)) {
      throw new RangeError(
        `Array.prototype.${original.name}: length ${n} is more than any array this script's memory can hold ` +
          `(${WALK_LIMIT}); walking a sparse array or an array-like that long would outlast timeout_secs`,
      );
    }
  };

  // The handlers: `cost` counted before the call; `walks`: `this` (and with
  // `walksArgs` each argument) refused when no memory backs its length.
  const counted = (cost) => ({
    apply(original, self, args) {
      spend(cost(self, args));
      return apply(original, self, args);
    },
  });
  const walked = (cost, walksArgs) => ({
    apply(original, self, args) {
      checkWalk(original, self);
      if (walksArgs) for (const arg of args) checkWalk(original, arg);
      if (cost !== null) spend(cost(self, args));
      return apply(original, self, args);
    },
  });
  const guard = (holder, handler, names) => {
    for (const name of names) holder[name] = new Proxy(holder[name], handler);
  };

  // A search for a long pattern in a long string compares up to both lengths
  // multiplied, in one call: it goes window by window instead.
  const windowed = (search) => ({
    apply(original, self, args) {
      const pattern = args[0];
      const n = sizeOf(self);
      if (typeof self === "string" && typeof pattern === "string" && n * pattern.length > SEARCH_WINDOW) {
        return search(self, pattern, args[1]);
      }
      spend(n >> 4);
      return apply(original, self, args);
    },
  });
  const forward = (s, p, from) => {
    const step = Math.max(1, Math.floor(SEARCH_WINDOW / p.length));
    const start = Math.min(Math.max(Math.trunc(Number(from)) || 0, 0), s.length);
    for (let i = start; i + p.length <= s.length; i += step) {
      spend(SEARCH_WINDOW >> 4);
      const found = apply(stringSearch, apply(slice, s, [i, i + step + p.length - 1]), [p]);
      if (found >= 0) return i + found;
    }
    return -1;
  };
  const backward = (s, p, from) => {
    const step = Math.max(1, Math.floor(SEARCH_WINDOW / p.length));
    const limit = Number(from);
    let end = Number.isNaN(limit) ? s.length : Math.min(Math.max(Math.trunc(limit), 0), s.length);
    for (; end >= 0; end -= step) {
      spend(SEARCH_WINDOW >> 4);
      const begin = Math.max(0, end - step + 1);
      const found = apply(stringLastSearch, apply(slice, s, [begin, end + p.length]), [p]);
      if (found >= 0) return begin + found;
    }
    return -1;
  };

  // The builtins that walk a whole array or string in C, with no callback
  // through which QuickJS would ask the handler (`map`, or `sort` with a
  // comparator, ask at every call of it). Each guard costs every call of its
  // builtin about a microsecond, so the list is kept to the usual ones.
  const walking = ["includes", "indexOf", "lastIndexOf", "join", "fill"];
  const moving = ["slice", "shift", "unshift", "splice", "reverse", "copyWithin"];
  const visiting = ["toLocaleString", "forEach", "map", "filter", "every", "some", "reduce", "reduceRight"];
  const AP = Array.prototype;
  guard(AP, walked(linear, false), [...walking, ...moving]);
  guard(AP, walked(sorting, false), ["sort"]);
  guard(AP, walked(null, false), [...visiting, "flat", "flatMap"]);
  guard(AP, walked(null, true), ["concat"]);
  const typed = Object.getPrototypeOf(Int8Array.prototype);
  guard(typed, counted(linear), walking);
  guard(typed, counted(sorting), ["sort"]);
  // Each of these makes or reads a whole string in C: `for (;;) s.toUpperCase()` on a 10 MB string, or
  // `for (;;) JSON.parse(s)`, ran tens of seconds past timeout_secs with Python's lock held (the whole
  // kernel stood still). JSON.stringify's cost is only known after: it is counted when it returns.
  const whole = ["toUpperCase", "toLowerCase", "toLocaleUpperCase", "toLocaleLowerCase", "normalize"];
  const SP = String.prototype;
  const trims = ["trim", "trimStart", "trimEnd"];
  guard(SP, counted(text), ["split", "replace", "replaceAll", ...whole, ...trims, "concat", "localeCompare"]);
  guard(SP, counted((self, args) => (sizeOf(self) + (Number(args[0]) || 0)) >> 4), ["padStart", "padEnd"]);
  guard(SP, counted((self, args) => (sizeOf(self) * (Number(args[0]) || 0)) >> 4), ["repeat"]);
  guard(SP, windowed(forward), ["indexOf"]);
  guard(SP, windowed((text, pattern, from) => forward(text, pattern, from) >= 0), ["includes"]);
  guard(SP, windowed(backward), ["lastIndexOf"]);
  guard(JSON, counted((self, args) => sizeOf(args[0]) >> 4), ["parse"]);
  guard(JSON, {
    apply(original, self, args) {
      const made = apply(original, self, args);
      spend(sizeOf(made) >> 4);
      return made;
    },
  }, ["stringify"]);

  const emit = (level) => (...parts) => log(level, parts.map(show).join(" "));
  g.console = {
    log: emit("info"),
    info: emit("info"),
    debug: emit("debug"),
    warn: emit("warning"),
    error: emit("error"),
  };
  g.print = g.console.log;
  g.module = { exports: {} };
  g.exports = g.module.exports;

  // A thrown non-Error (a string, an object) becomes an Error whose message
  // is its text, so the host always reports something readable. A thrown
  // null passes through untouched: it is also what QuickJS throws when it is
  // out of memory, and then allocating an Error would fail again.
  const asError = (e) => (e instanceof Error || e === null ? e : new Error(show(e)));
  // `work` starts from nothing in each call, also in a context kept between calls (reuse.py).
  return function invoke(fn, args) {
    work = 0;
    let result;
    try {
      result = fn(...args);
    } catch (e) {
      throw asError(e);
    }
    if (result instanceof Promise) {
      return result.then(undefined, (e) => {
        throw asError(e);
      });
    }
    return result;
  };
})(globalThis, HELPER_NAMES);
