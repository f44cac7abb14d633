"""Checks that run before a gRPC method's own code, for server interceptors (authorization, limits).

A check is an async function of the call's context; it refuses the call with ``context.abort``. The
method handler it guards keeps its arity, serializers and behaviour otherwise.
"""

from __future__ import annotations

import inspect
from typing import Any, AsyncIterator, Awaitable, Callable

import grpc

Context = grpc.aio.ServicerContext[Any, Any]
Check = Callable[[Context], Awaitable[None]]


async def _unimplemented(requests: Any, context: Context) -> None:
    await context.abort(grpc.StatusCode.UNIMPLEMENTED, "Method not found!")


# What an unknown method gets once its checks passed: a refused client learns nothing about which exist.
UNIMPLEMENTED = grpc.stream_stream_rpc_method_handler(_unimplemented)


def guarded(handler: grpc.RpcMethodHandler, check: Check) -> grpc.RpcMethodHandler:
    """The same handler, running *check* before the method's own code."""
    kind = (
        ("stream" if handler.request_streaming else "unary")
        + "_"
        + ("stream" if handler.response_streaming else "unary")
    )
    behavior = getattr(handler, kind)
    wrapped = _wrap_streaming(behavior, check) if handler.response_streaming else _wrap_unary(behavior, check)
    make = getattr(grpc, f"{kind}_rpc_method_handler")
    return make(
        wrapped,
        request_deserializer=handler.request_deserializer,
        response_serializer=handler.response_serializer,
    )


def _wrap_unary(behavior: Callable[..., Any], check: Check) -> Callable[..., Awaitable[Any]]:
    async def guarded(request: Any, context: Context) -> Any:
        await check(context)
        result = behavior(request, context)
        return await result if inspect.isawaitable(result) else result

    return guarded


def _wrap_streaming(behavior: Callable[..., Any], check: Check) -> Callable[..., AsyncIterator[Any]]:
    async def guarded(request: Any, context: Context) -> AsyncIterator[Any]:
        await check(context)
        result = behavior(request, context)
        if inspect.isasyncgen(result):
            async for item in result:
                yield item
        elif inspect.isawaitable(result):
            await result  # a coroutine that answers through context.write (grpc's health Watch)
        else:
            for item in result:
                yield item

    return guarded
