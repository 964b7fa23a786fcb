"""moto's DynamoDB expressions parsed once per text (a local-stack speed-up: no answer changes).

moto 5.2.5 parses an UpdateItem's UpdateExpression twice per request (its handler, then its
backend), lexes every ConditionExpression, FilterExpression and KeyConditionExpression character by
character (compiling its patterns again for each token), and copies the update's syntax tree with
``copy.deepcopy`` before validating it against the request's names, values and item: 1-2 ms of CPU
each on the local stack, where every DynamoDB request holds one lock
(``moto_process.serialize_dynamodb``). tagpin's functions send a few dozen expression texts, each
many times with other values. Here:

* an UpdateExpression's tree is parsed once per text and kept pickled: each request gets a fresh
  tree of its own (``pickle.loads``, as moto's fresh parse), so nothing one request's validation
  does to its tree reaches another's; a text moto refuses is parsed (and refused) every time;
* a condition's tokens are lexed once per text: moto's tokens are immutable named tuples (their
  ``children`` lists are empty and never filled), read by the later stages, which build new nodes;
  the names and values are looked up per request as moto does;
* the validators copy the tree with a pickle round trip, what ``deepcopy`` does for these plain
  objects (no ``__deepcopy__`` or ``__reduce__`` of their own), at a quarter of its cost;
* of the ten processors an UpdateExpression's validation runs over its tree, three only check what
  the text, the names and the table's key say (``CHECKS``: one SET, REMOVE, ADD and DELETE clause
  at most, no overlapping paths, no key attribute updated), and return the tree unchanged: they run
  once per (text, names, key attributes); those passed are not run again with the same. A check that
  fails records nothing (it fails again the next time); the others (values, the item, the types,
  the functions, the updates themselves) run on every request.

``install`` once per process (the stack's moto, in process or in its own; ``TAGPIN_LOCAL_MOTO_AS_IS=1``
leaves moto as it is); ``as_is`` puts moto's own back meanwhile (the tests compare the two).
"""

from __future__ import annotations

import copy
import os
import pickle
import weakref
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tagpin_local.moto_partitions import AS_IS

_updates: dict[str, bytes] = {}  # UpdateExpression text -> its tree, pickled
_conditions: dict[str, tuple[Any, ...]] = {}  # condition text -> its tokens
_trees: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()  # fresh tree -> its text
_checked: set[tuple[str, frozenset[tuple[str, str]], tuple[str, ...]]] = set()  # CHECKS passed
_moto: dict[tuple[Any, str], tuple[Any, Any]] = {}  # (owner, name) -> (moto's, ours): for as_is
_INHERITED = object()  # moto's class had no attribute of its own by that name


def _checks() -> tuple[type[Any], ...]:
    """The validators that check the text, names and key attributes only (``CHECKS``)."""
    from moto.dynamodb.parsing import validators

    return (
        validators.ActionCountValidator,
        validators.OverlappingPathsValidator,
        validators.UpdateHashRangeKeyValidator,
    )


def _validate(self: Any) -> Any:
    """``UpdateExpressionValidator.validate``, its ``CHECKS`` run once per text, names and key."""
    checks = _checks()
    text = _trees.get(getattr(self, "tagpin_tree", None))
    names = frozenset((self.expression_attribute_names or {}).items())
    key = None if text is None else (text, names, tuple(self.table.table_key_attrs))
    skip = key is not None and key in _checked
    left = sum(1 for p in self.processors if isinstance(p, checks))
    node = self.node_to_validate
    for processor in self.processors:
        if isinstance(processor, checks):
            if skip:
                continue
            node = processor.traverse(node)
            left -= 1
            if left == 0 and key is not None:
                _checked.add(key)
        else:
            node = processor.traverse(node)
    return node


def _copy(value: Any, memo: dict[int, Any] | None = None) -> Any:
    """The validators' ``deepcopy``: a syntax tree through pickle, anything else as moto copies it."""
    from moto.dynamodb.parsing.ast_nodes import Node  # type: ignore[attr-defined]

    if memo is None and isinstance(value, Node):
        return pickle.loads(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))  # noqa: S301 (our own bytes)
    return copy.deepcopy(value, memo)


def _targets() -> list[tuple[Any, str]]:
    """What ``install`` replaces: (module or class, attribute)."""
    from moto.dynamodb import comparisons
    from moto.dynamodb.parsing import validators
    from moto.dynamodb.parsing.expressions import UpdateExpressionParser  # type: ignore[attr-defined]

    return [
        (UpdateExpressionParser, "make"),
        (comparisons.ConditionExpressionParser, "_lex_condition_expression"),
        (validators, "deepcopy"),
        (validators.UpdateExpressionValidator, "__init__"),
        (validators.UpdateExpressionValidator, "validate"),
    ]


def install() -> bool:
    """Parse each expression text once in this process's moto (once per process); False when left
    as it is (``TAGPIN_LOCAL_MOTO_AS_IS=1``, as :mod:`.moto_partitions`)."""
    from moto.dynamodb import comparisons
    from moto.dynamodb.parsing import validators
    from moto.dynamodb.parsing.expressions import UpdateExpressionParser  # type: ignore[attr-defined]

    if os.environ.get(AS_IS) == "1":
        return False
    if _moto:
        return True
    make = UpdateExpressionParser.make.__func__
    lex = comparisons.ConditionExpressionParser._lex_condition_expression
    init = validators.UpdateExpressionValidator.__init__

    def parsed_once(cls: Any, expression: str) -> Any:
        pickled = _updates.get(expression)
        if pickled is None:
            tree = make(cls, expression)  # raises for a text moto refuses: nothing kept
            _updates[expression] = pickle.dumps(tree, protocol=pickle.HIGHEST_PROTOCOL)
        else:
            tree = pickle.loads(pickled)  # noqa: S301 (our own bytes)
        _trees[tree] = expression
        return tree

    def remembering(self: Any, expression: Any, *args: Any, **kwargs: Any) -> None:
        init(self, expression, *args, **kwargs)
        self.tagpin_tree = expression  # the tree as parsed (not the copy validated): its text

    def lexed_once(self: Any) -> deque[Any]:
        text = self.condition_expression
        tokens = _conditions.get(text)
        if tokens is None:
            tokens = _conditions[text] = tuple(lex(self))
        return deque(tokens)

    ours = [classmethod(parsed_once), lexed_once, _copy, remembering, _validate]
    for (owner, name), new in zip(_targets(), ours, strict=True):
        _moto[(owner, name)] = vars(owner).get(name, _INHERITED), new
        setattr(owner, name, new)
    return True


def _put(owner: Any, name: str, value: Any) -> None:
    if value is _INHERITED:
        delattr(owner, name)
    else:
        setattr(owner, name, value)


@contextmanager
def as_is() -> Iterator[None]:
    """moto's own parsing meanwhile, in this process (its answers are what ``install`` must keep)."""
    for (owner, name), (original, _new) in _moto.items():
        _put(owner, name, original)
    try:
        yield
    finally:
        for (owner, name), (_original, new) in _moto.items():
            _put(owner, name, new)
