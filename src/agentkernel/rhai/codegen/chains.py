"""Compiling chains: `a.b[c].d()`, properties, indexing and method calls, optional links (`?.`).

Reads of a map's property and of a list's element are inline when the
container's type allows; a method that changes its receiver (`Mutated`) has
the new value stored back into the chain it was called on.
"""

from __future__ import annotations

from typing import Any

from agentkernel.rhai.codegen.appends import append_in_place
from agentkernel.rhai.codegen.function import FunctionBase
from agentkernel.rhai.codegen.inline_methods import INLINE, inline_method
from agentkernel.rhai.codegen.operands import EXPR, TEMP, Operand, joined, list_index_test
from agentkernel.rhai.errors import Pos
from agentkernel.rhai.syntax import ast

PURE_METHODS = ("pure_method0", "pure_method", "pure_method2")  # by the number of arguments
# the methods (name, arguments after the receiver) the standard library has no pure native of that
# needs no context for (what `pure_method` runs): a call goes to the general path at once
# (a host's own pure one is found there too); tests/rhai/test_never_pure.py holds it to the library
NEVER_PURE = frozenset(
    {
        ("all", 1), ("append", 1), ("blob", 0), ("blob", 1), ("chop", 1), ("dedup", 0), ("dedup", 1),
        ("drain", 1), ("drain", 2), ("extract", 1), ("extract", 2), ("fill_with", 1), ("filter", 1),
        ("find", 1), ("find", 2), ("find_map", 1), ("find_map", 2), ("for_each", 1), ("insert", 2),
        ("map", 1), ("mixin", 1), ("order", 0), ("order", 1), ("order_by", 1), ("order_desc", 0),
        ("pad", 2), ("reduce", 1), ("reduce", 2), ("reduce_rev", 1), ("reduce_rev", 2),
        ("replace", 2), ("retain", 1), ("retain", 2), ("reverse", 0), ("set_bit", 2), ("set_bits", 2),
        ("set_tag", 1), ("shift", 0), ("some", 1), ("sort", 0), ("sort", 1), ("sort_by", 1),
        ("sort_desc", 0), ("splice", 2), ("split", 0), ("split", 2), ("split_rev", 1),
        ("split_rev", 2), ("take", 0), ("to_chars", 0), ("zip", 2),
    }
)  # fmt: skip
# the natives that change a string receiver and need no context (stdlib/strings.py
# `_register_changing`): on a variable, once seen, called at once (`Runtime.changing_method`)
CHANGING_STRING_METHODS = frozenset(
    {"trim", "make_upper", "make_lower", "clear", "truncate", "crop", "pop", "set", "remove"}
)


class Chains(FunctionBase):
    """Property, index and method-call chains."""

    def x_Property(self, node: ast.Property) -> Operand:
        return self.chain(node)

    def x_Index(self, node: ast.Index) -> Operand:
        return self.chain(node)

    def x_MethodCall(self, node: ast.MethodCall) -> Operand:
        if node.name == "append" and len(node.args) == 1 and not node.optional:
            return self.append_call(node)
        return self.chain(node)

    def append_call(self, node: ast.MethodCall) -> Operand:
        """`x.append(y)`: on a string held by a variable, property or element, grown in
        place (appends.py) unless the script defines its own `append(y)` method."""
        out = self.temp()
        with self.evaluated_once(node.target):
            item = self.value_copy(node.args[0])
            self.emit(f"{out} = None")

            def general(receiver: Operand) -> None:
                self.emit(f"{out} = {self.method_call(node, receiver, [item])}")

            if not append_in_place(self, node.target, item, general, also="not rt.functions_named_append"):
                general(self.named(self.expr(node.target)))
        return out

    def chain(self, node: ast.Property | ast.Index | ast.MethodCall) -> Operand:
        """Compile `a.b[c].d()`; an optional link that meets `()` skips the rest (RHAI.md §4)."""
        links: list[Any] = []
        base: Any = node
        while isinstance(base, ast.Property | ast.Index | ast.MethodCall):
            links.append(base)
            base = base.target
        links.reverse()
        out = self.temp()
        current = self.named(self.expr(base))
        going: str | None = None  # after an optional link: whether the chain goes on
        for place, link in enumerate(links):
            # a link that meets `()` takes back the steps the reference then never takes
            if link.optional and going is None:
                going = self.m.fresh("go")
                self.emit(f"{going} = {current} is not None and type({current}) is not TaggedUnit")
                self.take_back(len(links) - place, f"if not {going}: ")
            elif link.optional:
                self.emit(f"if {going} and ({current} is None or type({current}) is TaggedUnit):")
                with self.indented():
                    self.emit(f"{going} = False")
                    self.take_back(len(links) - place)
            if going is None:
                current = self.link(link, current)
                continue
            self.emit(f"if {going}:")  # each link one level in, however long the chain
            with self.indented():
                current = self.link(link, current)
        if going is None and current.place == TEMP:
            return current  # the last link's own temporary: no copy of it
        self.emit(f"{out} = {current}" if going is None else f"{out} = {current} if {going} else None")
        return out

    def link(self, link: Any, current: Operand) -> Operand:
        out = self.temp()
        if isinstance(link, ast.Property):
            name = self.str_literal(self.m.constant(link.name))
            if current in self.map_operands:  # a map's property is its key, whatever the name
                self.emit(f"{out} = {current}.get({name})", link.pos)
                return out
            if link.name == "len" and self.known_kinds.get(current.text) == "str":
                # a batch copy, run only while the inlined natives are the standard ones
                self.emit(f"{out} = len({current})", link.pos)
                self.int_operands.add(out)
                return out
            fast = f"{current}.get({name}) if {self.type_test(current, 'dict')}"
            if link.name == "len":  # the standard getter's own work, unless a host replaced it
                kinds = f"({self.type_test(current, 'str')} or {self.type_test(current, 'list')})"
                fast = f"len({current}) if {kinds} and {self.setting('natives_inline')} else {fast}"
            self.emit(f"{out} = {fast} else rt.get_prop({current}, {name})", link.pos)
        elif isinstance(link, ast.Index):
            index = self.index_of(link)
            if self.known_int(index) and index.int_value is None and current.is_name:
                self.list_item(out, current, index, ast.expr_pos(link.index))
                return out
            fast = list_index_test(current, index, self.known_int(index), self.type_test(current, "list"))
            slow = f"rt.index_get({current}, {index})"
            if index.int_value is not None:  # a literal index: a string's character at once too
                string_test = list_index_test(current, index).replace("is list", "is str", 1)
                slow = f"CHAR_OF({current}[{index}]) if {string_test} else {slow}"
            elif not self.known_int(index):  # a map's key first: what such an index most often is
                self.keyed_item(out, current, index, f"{current}[{index}] if {fast} else {slow}", link)
                return out
            self.emit(f"{out} = {current}[{index}] if {fast} else {slow}", ast.expr_pos(link.index))
        else:
            return self.method_call(link, current)
        return out

    def keyed_item(
        self, out: Operand, current: Operand, index: Operand, listed: str, link: ast.Index
    ) -> None:
        """`current[index]`, an index not proven an int: a map's string key first, tested only
        as far as the types are not known; a string index never reads a list (`listed`)."""
        keyed = self.key_test(current, index)
        text = index in self.text_operands or self.is_str_constant(index)
        read = f"{current}.get({index})"
        if keyed:
            slow = f"rt.index_get({current}, {index})" if text else listed
            read = f"{read} if {' and '.join(keyed)} else {slow}"
        self.emit(f"{out} = {read}", ast.expr_pos(link.index))

    def key_test(self, container: Operand, key: Operand, unless: str = "") -> list[str]:
        """What is left to test for `container[key]` to be a map's string key (and, with
        `unless`, the setting of that name off)."""
        if container in self.map_operands:
            tests = [f"not {self.setting(unless)}"] if unless else []
        else:
            tests = [self.type_test(container, "dict", unless=unless)]
        if not (key in self.text_operands or self.is_str_constant(key)):
            tests.append(self.type_test(key, "str"))
        return tests

    def list_item(self, out: Operand, current: Operand, index: Operand, pos: Pos | None) -> None:
        """`current[index]` for an index known to be an int: Python's own bounds check (a
        negative index counts from the end, as Rhai's does) stands for the test, as in an
        assignment's (assignments.py); out of range or not a list, the slow path words it."""
        if self.loop_flags is not None:
            self.loop_flags.item_of(out.text, current.text)
        self.emit("try:")
        with self.indented(blocks=1):
            if current.text not in self.proven_lists:
                self.emit(f"if {self.type_test(current, 'list', negated=True)}: raise IndexError", pos)
            self.emit(f"{out} = {current}[{index}]", pos)
        self.emit("except IndexError:")
        with self.indented(blocks=1):  # an except handler is a block to CPython
            self.emit(f"{out} = rt.index_get({current}, {index})", pos)

    def method_call(
        self, node: ast.MethodCall, receiver: Operand, args: list[Operand] | None = None
    ) -> Operand:
        """`receiver.name(args)`; `args` when already evaluated (`append_call`)."""
        if args is None and (node.name, len(node.args)) in INLINE:
            return self.inlined_call(node, receiver)
        if args is None:
            args = [self.value_copy(a) for a in node.args]
        out = self.temp()
        if node.name == "call" and node.args:  # `x.call(fn, …)`: `fn` not a pointer fails where it stands
            self.emit(
                f"if type({receiver}) is not FnPtr: rt_expect({args[0]}, FnPtr)", ast.start_pos(node.args[0])
            )
        arg_list = f"[{joined(args)}]"
        name = self.m.constant(node.name)
        if node.name in ("type_of", "is_shared") and not args:
            self.emit(f"{out} = type_name({receiver})" if node.name == "type_of" else f"{out} = False")
            return out
        const = self.is_const(node.target)
        if node.name == "push" and len(args) == 1:
            self.push(node, receiver, args[0], out, const)
            return out
        at_once = (
            len(args) <= 2 and node.name not in ("call", "curry") and (node.name, len(args)) not in NEVER_PURE
        )
        changing = (
            at_once
            and node.name in CHANGING_STRING_METHODS
            and const == "False"
            and self.is_lvalue(node.target)
        )
        if at_once:  # a pure native at once, if one is known
            pure = f"rt.{PURE_METHODS[len(args)]}({name}, {receiver}{''.join(f', {a}' for a in args)})"
            self.emit(f"{out} = {pure}", node.pos)
            self.emit(f"if {out} is NOT_PURE:")
            self.ind += 1
            if changing:  # a string's change at once
                self.emit(
                    f"{out} = rt.changing_method({name}, {receiver}{''.join(f', {a}' for a in args)})",
                    node.pos,
                )
                self.emit(f"if {out} is NOT_PURE:")
                self.ind += 1
        self.emit(f"{out} = rt_method(rt, {name}, {receiver}, {arg_list}, {const}, d + 1)", node.pos)
        if changing:
            self.ind -= 1
        self.emit(f"if type({out}) is Mutated:")
        with self.indented():
            if self.is_lvalue(node.target):
                self.store(node.target, Operand(f"{out}.receiver", EXPR), node.pos)
                self.receiver_stored(node.target)
            self.emit(f"{out} = {out}.result")
        if at_once:
            self.ind -= 1
        return out

    def push(self, node: ast.MethodCall, receiver: Operand, value: Operand, out: Operand, const: str) -> None:
        """`a.push(x)`: appended at once to a list that is no constant, while no script method
        `push` is defined; the general path (a method's call) otherwise, which in a loop counting
        in a local (control.py) is handed the count first, as an inlined method's is."""
        opened = const == "False"
        if opened:
            pushes = self.setting("functions_named_push")
            self.emit(f"if {self.type_test(receiver, 'list')} and not {pushes}:")
            with self.indented():
                self.emit(f"{receiver}.append({value})")
                self.emit(f"if {self.setting('sizes_checked')}: rt.pushed({receiver})", node.pos)
                self.emit(f"{out} = None")
            self.emit("else:")
            self.ind += 1
        self.hand_count()
        name = self.m.constant(node.name)
        self.emit(f"{out} = rt_method(rt, {name}, {receiver}, [{value}], {const}, d + 1)", node.pos)
        self.emit(f"if type({out}) is Mutated:")  # a script's own `push` that changed `this`
        with self.indented():
            if self.is_lvalue(node.target):
                self.store(node.target, Operand(f"{out}.receiver", EXPR), node.pos)
                self.receiver_stored(node.target)
            self.emit(f"{out} = {out}.result")
        self.take_room()
        if opened:
            self.ind -= 1

    def counted_predicate(
        self, cond: ast.Expr, call: ast.MethodCall, negated: bool, head: tuple[int, Pos | None]
    ) -> Operand:
        """The test `cond` of an `if` on `x.contains(c)` (or its `!`: `negated`) whose block's count,
        `head`, goes into its branches (control.py `if_counted_in_branches`): the inline path
        cannot fail, so nothing needs counting before it; the general path counts `head` first,
        as the block would have, and takes it back once it has the answer, a bool."""
        receiver = self.expr(call.target)
        values = [self.expr(a) for a in call.args]
        out = self.temp()
        const = self.is_const(call.target)
        fit = inline_method(self, call, receiver, values, out, const, negated=negated)
        if fit == "certain":
            return out
        head_ops, head_pos = head
        self.count(head_ops, head_pos)
        self.hand_count()
        kept = [self.kept_copy(arg, value) for arg, value in zip(call.args, values, strict=True)]
        self.emit(f"{out} = {self.method_call(call, receiver, kept)}")
        self.take_room()
        if negated:
            flipped = f"op_unary({self.m.constant('!')}, {out})"
            self.emit(f"{out} = True if {out} is False else False if {out} is True else {flipped}", cond.pos)
        self.emit(f"{out} = {out} if {out} is True or {out} is False else cond({out})", ast.expr_pos(cond))
        self.take_back(head_ops)
        if fit == "opened":
            self.ind -= 1
        return out

    def inlined_call(self, node: ast.MethodCall, receiver: Operand) -> Operand:
        """A method of `INLINE` (inline_methods.py): the fast path takes the arguments as they are;
        only the general path, which may keep them, gets the copy a second owner needs
        (`value_copy`). In a loop counting in a local (control.py), the general path hands
        the runtime the count first and takes the room left back after."""
        values = [self.expr(a) for a in node.args]
        out = self.temp()
        fit = inline_method(self, node, receiver, values, out, self.is_const(node.target))
        if fit == "certain":
            return out
        self.hand_count()
        kept = [self.kept_copy(arg, value) for arg, value in zip(node.args, values, strict=True)]
        self.emit(f"{out} = {self.method_call(node, receiver, kept)}")
        self.take_room()
        if fit == "opened":
            self.ind -= 1
        return out

    def kept_copy(self, arg: ast.Expr, value: Operand) -> Operand:
        """`value` (of `arg`, already evaluated) for a second owner, as `value_copy` gives it (a
        string's own character, walked as it is: the `char` it stands for)."""
        walked = self.raw_chars.get(value.text)
        if walked is not None:
            char = self.temp()
            self.emit(f"{char} = CHAR_OF({value}) if {walked} else {value}")
            return char
        if isinstance(arg, ast.Var | ast.Property | ast.Index | ast.This) and not self.known_int(value):
            copy = self.temp()
            self.emit(f"{copy} = {self.copied(value)}")
            return copy
        return value


__all__ = ["Chains"]
