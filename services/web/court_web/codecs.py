"""The edge's codecs: binary protobuf, and the Connect JSON mapping written compactly.

connectrpc's google.protobuf JSON codec writes indented JSON (``MessageToJson``'s default, two
spaces a level): a Hearts seat's opening view is 932 bytes that way and 374 written compactly (a
Queen's Court one 1,633 and 674), on every call and every WatchGame update a browser reads
(connect-web speaks JSON unless told otherwise). This one writes
the same JSON mapping without the whitespace, and reads strictly: a field the protos do not have is
``invalid_argument``, never ignored.
"""

from __future__ import annotations

import json
from typing import Any

from connectrpc.compat import google_protobuf_binary_codec
from google.protobuf import json_format


class CompactJSONCodec:
    def name(self) -> str:
        return "json"

    def encode(self, message: Any) -> bytes:
        return json.dumps(
            json_format.MessageToDict(message), separators=(",", ":"), ensure_ascii=False
        ).encode()

    def decode(self, data: bytes | bytearray, message_class: type[Any]) -> Any:
        message = message_class()
        json_format.Parse(bytes(data), message, ignore_unknown_fields=False)
        return message


CODECS = (google_protobuf_binary_codec(), CompactJSONCodec())
