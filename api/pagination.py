"""Every list is paginated: pages by number (`page`, `page_size`), and a run's events
by a cursor on their `seq` (`after_seq`, `limit`), which is what tailing a run needs: ask
again with the `next_after_seq` of the last answer and get only what is new.

Bad values are refused with 400 naming the parameter, not silently replaced."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from django.core.paginator import EmptyPage, Paginator
from rest_framework import pagination, serializers
from rest_framework.exceptions import NotFound
from rest_framework.response import Response
from rest_framework.utils.urls import replace_query_param

# The largest page number and seq read is PostgreSQL's integer, which seqs are. The
# schema declares the same bound, so a larger value is a documented 400, not a surprise.
from .serializers import INT32_MAX, QueryParams

MAX_PAGE_SIZE = 500
MAX_EVENTS = 1000


class PageQuery(QueryParams):
    page = serializers.IntegerField(min_value=1, max_value=INT32_MAX, required=False)
    page_size = serializers.IntegerField(min_value=1, max_value=MAX_PAGE_SIZE, required=False)


class PageNumberPagination(pagination.PageNumberPagination):
    page_size_query_param = "page_size"
    max_page_size = MAX_PAGE_SIZE

    def paginate_queryset(self, queryset: Any, request: Any, view: Any = None) -> list[Any]:
        query = PageQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        size = query.validated_data.get("page_size", self.page_size)
        number = query.validated_data.get("page", 1)
        paginator = Paginator(queryset, size)
        counted = getattr(view, "counted", None)
        if counted is not None:
            # Rows one-to-one with the queryset's, cheaper to count (api/views.py).
            paginator.count = counted.count()
        try:
            self.page = paginator.page(number)
        except EmptyPage:
            raise NotFound(
                f"no page {number}: there are {paginator.num_pages} page(s) of {size}"
            ) from None
        self.request = request
        return list(self.page)

    def get_paginated_response(self, data: Any) -> Response:
        assert self.page is not None  # set by paginate_queryset, which DRF calls first
        return Response(
            OrderedDict(
                [
                    ("count", self.page.paginator.count),
                    ("next", self.get_next_link()),
                    ("previous", self.get_previous_link()),
                    ("results", data),
                ]
            )
        )

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        return [
            _query_param(
                "page",
                "Page number, from 1.",
                {"type": "integer", "minimum": 1, "maximum": INT32_MAX},
            ),
            _query_param(
                "page_size",
                f"Items per page (default {self.page_size}, at most {MAX_PAGE_SIZE}).",
                {"type": "integer", "minimum": 1, "maximum": MAX_PAGE_SIZE},
            ),
        ]

    def get_paginated_response_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        return {
            "type": "object",
            "required": ["count", "next", "previous", "results"],
            "properties": {
                "count": {"type": "integer"},
                "next": {"type": "string", "format": "uri", "nullable": True},
                "previous": {"type": "string", "format": "uri", "nullable": True},
                "results": schema,
            },
        }


class SeqQuery(QueryParams):
    after_seq = serializers.IntegerField(min_value=0, max_value=INT32_MAX, required=False)
    limit = serializers.IntegerField(min_value=1, max_value=MAX_EVENTS, required=False)


class SeqCursorPagination(pagination.BasePagination):
    """Events after `after_seq` (default 0: from the start), at most `limit`, by seq."""

    default_limit = 100

    def paginate_queryset(self, queryset: Any, request: Any, view: Any = None) -> list[Any]:
        query = SeqQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        self.after_seq = query.validated_data.get("after_seq", 0)
        limit = query.validated_data.get("limit", self.default_limit)
        rows = list(queryset.filter(seq__gt=self.after_seq).order_by("seq")[: limit + 1])
        self.has_more = len(rows) > limit
        self.rows = rows[:limit]
        self.request = request
        return self.rows

    def get_paginated_response(self, data: Any) -> Response:
        last = self.rows[-1].seq if self.rows else self.after_seq
        url = self.request.build_absolute_uri()
        next_url = replace_query_param(url, "after_seq", last) if self.has_more else None
        return Response(
            OrderedDict(
                [
                    ("next", next_url),
                    ("next_after_seq", last),
                    ("results", data),
                ]
            )
        )

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        return [
            _query_param(
                "after_seq",
                "Only events with a larger seq (default 0: from the first). To tail a run, "
                "pass the `next_after_seq` of the previous answer.",
                {"type": "integer", "minimum": 0, "maximum": INT32_MAX},
            ),
            _query_param(
                "limit",
                f"At most this many events (default {self.default_limit}, at most {MAX_EVENTS}).",
                {"type": "integer", "minimum": 1, "maximum": MAX_EVENTS},
            ),
        ]

    def get_paginated_response_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        return {
            "type": "object",
            "required": ["next", "next_after_seq", "results"],
            "properties": {
                "next": {
                    "type": "string",
                    "format": "uri",
                    "nullable": True,
                    "description": "More events are already there: this URL fetches them.",
                },
                "next_after_seq": {
                    "type": "integer",
                    "description": "The seq of the last event returned (or the after_seq "
                    "asked for, if none): the after_seq of the next request.",
                },
                "results": schema,
            },
        }


def _query_param(name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": name,
        "required": False,
        "in": "query",
        "description": description,
        "schema": schema,
    }
