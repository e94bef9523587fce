"""The patterns the CRD schemas share: the API server checks them, and the operator re-checks them."""

DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
# Relative path inside the volume: segments may not start with a dot, so "." and ".." are impossible.
AGENT_PATH = r"^$|^[A-Za-z0-9_-][A-Za-z0-9._-]*(/[A-Za-z0-9_-][A-Za-z0-9._-]*)*$"
# Five cron fields or a macro. CEL cannot parse cron; croniter in the operator is the real check.
CRON = r"^(@(yearly|annually|monthly|weekly|daily|midnight|hourly)|\S+(\s+\S+){4})$"
CATEGORY_PATH = r"^/?[A-Za-z0-9_-]+(/[A-Za-z0-9_-]+)*/?$"
# A vocabulary word: no surrounding whitespace, no control characters.
WORD = r"^[^\s\x00-\x1f]([^\x00-\x1f]*[^\s\x00-\x1f])?$"
CONDITION_REASON = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"
# A base URL whose host is loopback or an in-cluster Service (<svc>, <svc>.<ns>.svc, <svc>.<ns>.svc.cluster.local):
# the only places plain http:// may go, and the only servers that may need no API key. A regex (not CEL's url()
# or ip() libraries) so the rule compiles on every API server the chart supports. Userinfo ("a@b") cannot match.
_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
INTERNAL_URL = (
    rf"^https?://(localhost|127(\.[0-9]{{1,3}}){{3}}|\[::1\]|{_LABEL}(\.{_LABEL}\.svc(\.cluster\.local)?)?)"
    r"(:[0-9]{1,5})?(/[^@]*)?$"
)
