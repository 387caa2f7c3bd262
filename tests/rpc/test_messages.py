"""The JSON-RPC 2.0 codec and MCP shapes: pure, bytes in, typed messages out."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gbr_node.errors import CallTimeout, LocalProtocolError, RemoteProtocolError, RpcError
from gbr_node.rpc import codes
from gbr_node.rpc.messages import (
    ErrorResponse,
    Notification,
    Request,
    Response,
    decode_message,
    encode_message,
    error_response,
)


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        (b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}', Request),
        (b'{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"x"}}', Request),
        (b'{"jsonrpc":"2.0","method":"notifications/x","params":{}}', Notification),
        (b'{"jsonrpc":"2.0","id":1,"result":{}}', Response),
        (b'{"jsonrpc":"2.0","id":1,"result":null}', Response),
        (
            b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"m","data":[1]}}',
            ErrorResponse,
        ),
    ],
)
def test_each_kind_of_message_decodes_to_its_type(data: bytes, kind: type) -> None:
    assert type(decode_message(data)) is kind


@pytest.mark.parametrize(
    ("data", "code"),
    [
        (b"\xff\xfe", codes.PARSE_ERROR),
        (b"", codes.PARSE_ERROR),
        (b'{"jsonrpc":"2.0",', codes.PARSE_ERROR),
        (b'{"jsonrpc":"2.0","id":1,"result":NaN}', codes.PARSE_ERROR),
        (b"[" * 100_000, codes.PARSE_ERROR),
        (b'[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]', codes.INVALID_REQUEST),
        (b"[]", codes.INVALID_REQUEST),
        (b'"tools/list"', codes.INVALID_REQUEST),
        (b'{"id":1,"method":"tools/list"}', codes.INVALID_REQUEST),
        (b'{"jsonrpc":"1.0","id":1,"method":"tools/list"}', codes.INVALID_REQUEST),
        (b'{"jsonrpc":"2.0","id":null,"method":"tools/list"}', codes.INVALID_REQUEST),
        (b'{"jsonrpc":"2.0","id":true,"method":"tools/list"}', codes.INVALID_REQUEST),
        (b'{"jsonrpc":"2.0","id":1.5,"method":"tools/list"}', codes.INVALID_REQUEST),
        (b'{"jsonrpc":"2.0","id":1,"method":7}', codes.INVALID_REQUEST),
        (b'{"jsonrpc":"2.0","id":1,"method":"m","params":"p"}', codes.INVALID_REQUEST),
        (b'{"jsonrpc":"2.0","id":1,"method":"m","extra":1}', codes.INVALID_REQUEST),
        (b'{"jsonrpc":"2.0","id":1}', codes.INVALID_REQUEST),
        (b'{"jsonrpc":"2.0","id":1,"error":{"code":"x","message":"m"}}', codes.INVALID_REQUEST),
    ],
)
def test_bad_messages_give_the_right_json_rpc_code(data: bytes, code: int) -> None:
    with pytest.raises(RemoteProtocolError) as caught:
        decode_message(data)
    assert caught.value.code == code


def test_batch_refusal_says_why() -> None:
    with pytest.raises(RemoteProtocolError, match="batch requests are not supported"):
        decode_message(b'[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]')


def test_invalid_request_message_names_the_member_not_python_internals() -> None:
    with pytest.raises(RemoteProtocolError) as caught:
        decode_message(b'{"jsonrpc":"2.0","id":true,"method":"tools/list"}')
    assert caught.value.message.startswith("id: ")
    assert "pydantic" not in caught.value.message and "Traceback" not in caught.value.message


def test_encoding_is_compact_utf8_and_omits_absent_members() -> None:
    assert encode_message(Request(id=1, method="tools/list")) == (
        b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}'
    )
    assert encode_message(Notification(method="notifications/x", params={"t": "é"})) == (
        '{"jsonrpc":"2.0","method":"notifications/x","params":{"t":"é"}}'.encode()
    )
    assert encode_message(error_response(None, -32700, "bad")) == (
        b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"bad"}}'
    )
    assert (
        encode_message(Response(id="x", result=None)) == b'{"jsonrpc":"2.0","id":"x","result":null}'
    )


def test_an_unencodable_result_is_a_local_protocol_error() -> None:
    with pytest.raises(LocalProtocolError) as caught:
        encode_message(Response(id=1, result={"x": object()}))
    assert caught.value.code == codes.INTERNAL_ERROR


def test_wire_errors_map_to_classes_that_keep_code_message_and_data() -> None:
    error = codes.error_from_wire(codes.CALL_TIMEOUT, "too slow", {"s": 1})
    assert isinstance(error, codes.PeerCallTimeout)
    assert isinstance(error, CallTimeout) and isinstance(error, RpcError)
    assert (error.code, error.message, error.data) == (codes.CALL_TIMEOUT, "too slow", {"s": 1})
    assert type(codes.error_from_wire(codes.BUSY, "b")) is codes.PeerBusy
    assert type(codes.error_from_wire(codes.PARSE_ERROR, "p")) is codes.RequestRejected
    assert type(codes.error_from_wire(-31999, "other")) is RpcError


def test_application_codes_are_distinct_and_in_the_server_error_range() -> None:
    app = [codes.UNAUTHORIZED_PEER, codes.SECURITY_VIOLATION, codes.CALL_TIMEOUT]
    app += [codes.TOO_LARGE, codes.BUSY]
    assert len(set(app)) == len(app)
    assert all(-32099 <= code <= -32000 for code in app)


@given(st.binary(max_size=200))
def test_any_bytes_decode_to_a_message_or_a_protocol_error(data: bytes) -> None:
    try:
        decode_message(data)
    except RemoteProtocolError as exc:
        assert exc.code in (codes.PARSE_ERROR, codes.INVALID_REQUEST)


_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
_envelope_like = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.sampled_from(["2.0", "1.0"]) | _json,
        "id": st.integers() | st.text(max_size=4) | _json,
        "method": st.sampled_from(["tools/list", "tools/call"]) | _json,
        "params": _json,
        "result": _json,
        "error": st.fixed_dictionaries({"code": st.integers(), "message": st.text()}) | _json,
    },
)


@given(_envelope_like | _json)
def test_any_json_value_decodes_to_a_message_or_invalid_request(value: object) -> None:
    data = json.dumps(value).encode()
    try:
        message = decode_message(data)
    except RemoteProtocolError as exc:
        assert exc.code == codes.INVALID_REQUEST
    else:
        assert decode_message(encode_message(message)) == message


_ids = st.integers() | st.text(max_size=6)
_params = st.dictionaries(st.text(max_size=6), _json, max_size=3) | st.lists(_json, max_size=3)


def _with(base: dict, **optional: object) -> dict:
    return {**base, **{k: v for k, v in optional.items() if v is not None}}


_valid_message = st.one_of(
    st.builds(
        lambda i, m, p: _with({"jsonrpc": "2.0", "id": i, "method": m}, params=p),
        _ids,
        st.text(max_size=12),
        st.none() | _params,
    ),
    st.builds(
        lambda m, p: _with({"jsonrpc": "2.0", "method": m}, params=p),
        st.text(max_size=12),
        st.none() | _params,
    ),
    st.builds(lambda i, r: {"jsonrpc": "2.0", "id": i, "result": r}, _ids, _json),
    st.builds(
        lambda i, c, m, d: {
            "jsonrpc": "2.0",
            "id": i,
            "error": _with({"code": c, "message": m}, data=d),
        },
        st.none() | _ids,
        st.integers(),
        st.text(max_size=12),
        _json,
    ),
)


@given(_valid_message)
def test_every_valid_message_decodes_and_encodes_back_to_the_same_json(value: dict) -> None:
    message = decode_message(json.dumps(value).encode())
    assert json.loads(encode_message(message)) == value
