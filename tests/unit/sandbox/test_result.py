"""The strict result rule: JSON types pass, anything else is refused naming its path and type."""

from __future__ import annotations

import collections
import decimal
import uuid

import pytest

from shared.sandbox.child.result import ResultNotJson, ResultTooLarge, encode_result


def test_json_values_and_the_documented_conversions() -> None:
    value = {"a": (1, 2.5, None, True), 3: "three", "c": collections.OrderedDict(k="v")}
    assert (
        encode_result(value, max_bytes=1000) == '{"a":[1,2.5,null,true],"3":"three","c":{"k":"v"}}'
    )


@pytest.mark.parametrize(
    ("value", "path", "python_type"),
    [
        ({1, 2}, "result", "set"),
        ({"a": [0, 1, frozenset()]}, "result['a'][2]", "frozenset"),
        ([{"x": b"1"}], "result[0]['x']", "bytes"),
        ({"d": decimal.Decimal("1.5")}, "result['d']", "Decimal"),
        ({"u": uuid.UUID(int=0)}, "result['u']", "UUID"),
        ({"n": float("inf")}, "result['n']", "float"),
        ({"k": {None: 1}}, "result['k']", "NoneType"),
        ({"k": {True: 1}}, "result['k']", "bool"),
        ([10**5000], "result[0]", "int"),
    ],
)
def test_non_json_is_refused_naming_path_and_type(
    value: object, path: str, python_type: str
) -> None:
    with pytest.raises(ResultNotJson) as caught:
        encode_result(value, max_bytes=1 << 20)
    assert (caught.value.path, caught.value.python_type) == (path, python_type)
    assert str(caught.value).startswith(path + " ")


def test_a_shared_reference_bomb_is_refused_within_the_byte_budget() -> None:
    value: object = ["x" * 10]
    for _ in range(40):  # 2**40 leaves once encoded
        value = [value, value]
    with pytest.raises(ResultTooLarge):
        encode_result(value, max_bytes=1 << 20)


def test_escapes_that_grow_past_the_budget_are_too_large() -> None:
    with pytest.raises(ResultTooLarge):
        encode_result("\x01" * 500, max_bytes=1000)
