// Installed into every fresh QuickJS context before the script runs.
// Binds each helper of the kernel's table as a global function, plus
// console.*/print, and returns the `invoke` function the host calls the
// script's entry point through. HELPER_NAMES is replaced by a JSON array.
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

  const bind = (name) => {
    const helper = function (...args) {
      let payload;
      try {
        payload = JSON.stringify(args);
      } catch (e) {
        throw new TypeError(name + ": arguments cannot be passed: " + e.message);
      }
      const reply = call(name, payload);
      if (reply.charCodeAt(0) === 101 /* "e" */) throw new Error(reply.slice(1));
      return JSON.parse(reply.slice(1));
    };
    Object.defineProperty(helper, "name", { value: name });
    return helper;
  };
  for (const name of names) g[name] = bind(name);

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
  return function invoke(fn, args) {
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
