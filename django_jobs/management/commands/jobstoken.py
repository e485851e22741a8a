"""``manage.py jobstoken``: create, revoke and list the HTTP API's tokens.

    manage.py jobstoken create billing-service --scopes submit,read
    manage.py jobstoken revoke djj_AbC12345
    manage.py jobstoken list

A new token's secret is printed once, by ``create``: only its hash is stored.
"""

from __future__ import annotations

import argparse
import json
from typing import Any, cast

from django.core.management.base import BaseCommand, CommandError
from django.db.models import Q
from django.utils import timezone

from django_jobs.core.job_json import iso
from django_jobs.management import arguments
from django_jobs.models.tokens import TOKEN_PREFIX, ApiToken

NAME_LENGTH = cast(int, ApiToken._meta.get_field("name").max_length)


def token_name(text: str) -> str:
    name = text.strip()
    if not name or len(name) > NAME_LENGTH or not name.isprintable():
        raise argparse.ArgumentTypeError(
            f"{text!r}: a name is 1 to {NAME_LENGTH} printable characters"
        )
    return name


def scopes(text: str) -> list[str]:
    return arguments.names_from(text, ApiToken.Scope.values, "scope")


def token_ref(text: str) -> str:
    """A token's id (as ``list`` shows it) or the first characters of its secret."""
    if (text.isascii() and text.isdigit() and len(text) < 19) or (
        text.startswith(TOKEN_PREFIX) and 6 < len(text) <= 12 and text.isprintable()
    ):
        return text
    raise argparse.ArgumentTypeError(
        f"{text!r} is neither a token id nor a token prefix ({TOKEN_PREFIX}… as list shows)"
    )


class Command(BaseCommand):
    help = "Create, revoke and list API tokens."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
        create = sub.add_parser("create", help="a new token; its secret is printed once")
        create.add_argument("name", type=token_name, help="who or what uses the token")
        create.add_argument("--scopes", type=scopes, required=True,
                            help="comma-separated: submit (POST /jobs), read (GET jobs and "
                            "metrics), manage (cancel and retry)")
        revoke = sub.add_parser("revoke", help="revoke tokens by id or prefix")
        revoke.add_argument("tokens", nargs="+", type=token_ref, metavar="token")
        listing = sub.add_parser("list", help="live tokens (with --all, revoked ones too)")
        listing.add_argument("--all", action="store_true", help="include revoked tokens")
        for action in sub.choices.values():
            action.add_argument("--json", action="store_true", help="print JSON")
            arguments.common_options(action)

    def handle(self, *args: Any, **options: Any) -> None:
        arguments.ensure_migrated()
        getattr(self, f"do_{options['action']}")(options)

    def do_create(self, options: dict[str, Any]) -> None:
        token, secret = ApiToken.generate(options["name"], options["scopes"])
        token.save()
        if options["json"]:
            self.stdout.write(json.dumps({**token_json(token), "token": secret}, indent=2))
            return
        self.stdout.write(f"created token {token.pk} {token.name!r} with scopes "
                          f"{', '.join(token.scopes)}; copy it now, it will not be shown again:")
        self.stdout.write(secret)

    def do_revoke(self, options: dict[str, Any]) -> None:
        found: list[ApiToken] = []
        for ref in dict.fromkeys(options["tokens"]):
            match = Q(key_prefix=ref) if ref.startswith(TOKEN_PREFIX) else Q(pk=int(ref))
            tokens = list(ApiToken.objects.filter(match)[:2])
            if len(tokens) != 1:
                raise CommandError(f"{'no' if not tokens else 'more than one'} token {ref}: "
                                   "nothing was revoked")
            found.append(tokens[0])
        results = []
        for token in found:
            changed = ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(
                revoked_at=timezone.now()
            )
            token.refresh_from_db()
            results.append((token, bool(changed)))
        if options["json"]:
            self.stdout.write(json.dumps(
                [{**token_json(token), "changed": changed} for token, changed in results],
                indent=2))
            return
        for token, changed in results:
            self.stdout.write(f"{token}: {'revoked' if changed else 'already revoked'}")

    def do_list(self, options: dict[str, Any]) -> None:
        tokens = ApiToken.objects.order_by("pk")
        if not options["all"]:
            tokens = tokens.filter(revoked_at__isnull=True)
        if options["json"]:
            self.stdout.write(json.dumps([token_json(t) for t in tokens], indent=2))
            return
        rows = [(t.pk, t.name, t.key_prefix + "…", ",".join(t.scopes or []), iso(t.created_at),
                 iso(t.last_used_at), iso(t.revoked_at)) for t in tokens]
        if not rows:
            self.stdout.write("no tokens")
            return
        self.stdout.write("\n".join(arguments.table(
            ["id", "name", "prefix", "scopes", "created", "last used", "revoked"], rows)))


def token_json(token: ApiToken) -> dict[str, Any]:
    """A token without its secret (never stored, so never shown again)."""
    return {
        "id": token.pk, "name": token.name, "prefix": token.key_prefix,
        "scopes": token.scopes, "created_at": iso(token.created_at),
        "last_used_at": iso(token.last_used_at), "revoked_at": iso(token.revoked_at),
    }
