"""OpenAI wire formats in, one RoutingRequest out; routed bodies and immediate replies back."""

from extproc.protocol.openai import parse_request
from extproc.protocol.request import ApiKind, Role, RoutingRequest, TextSegment

__all__ = ["ApiKind", "Role", "RoutingRequest", "TextSegment", "parse_request"]
