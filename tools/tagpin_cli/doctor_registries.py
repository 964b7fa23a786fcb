"""``tagpin doctor``'s registry checks: one followed tag per registry resolved (HEAD) with the
registry's credentials; on AWS, each cross-account ECR role of the configuration
(``registries.<host>.ecr.role_arn``) may be assumed by the functions that read registries.
"""

from __future__ import annotations

from typing import Any

from tagpin_cli.doctor_seat import REGISTRY_READERS, Result, Seat, Status, allowed_by_iam, short


def check_registries(seat: Seat) -> list[Result]:
    from tagpin import wiring
    from tagpin.adapters.registry.credentials import CredentialsError
    from tagpin.ports.registry import AuthError, ManifestNotFound, RegistryError

    by_host: dict[str, Any] = {}
    for followed in seat.followed:
        by_host.setdefault(followed.ref.registry, followed)
    results = []
    for host, followed in sorted(by_host.items()):
        settings = seat.config.registry(host)
        secret = settings.credentials_secret
        resolve = f"tagpin resolve {followed.image}"
        try:
            access = wiring.registry_access(host)
            resolution = wiring.registry_client().resolve(followed.ref)
        except AuthError as exc:
            fix = (
                f"check the username and password in the secret {secret} (docs/registries.md), then {resolve}"
                if secret
                else f"the registry wants credentials: set registries.{host}.credentials_secret "
                "(docs/registries.md)"
            )
            results.append(Result("registry", host, Status.FAIL, f"credentials refused: {short(exc)}", fix))
            continue
        except ManifestNotFound:
            results.append(
                Result(
                    "registry",
                    host,
                    Status.WARN,
                    f"answers, but {followed.image} does not exist (not pushed yet?)",
                    f"push the tag, or fix the image name; then {resolve}",
                )
            )
            continue
        except (RegistryError, CredentialsError) as exc:
            results.append(
                Result(
                    "registry",
                    host,
                    Status.FAIL,
                    short(exc),
                    f"check the registry's address, network access and TLS (registries.{host}); "
                    f"then {resolve}",
                )
            )
            continue
        auth = "with credentials" if access.credentials else "anonymously"
        results.append(
            Result(
                "registry",
                host,
                Status.OK,
                f"{resolution.method} {followed.ref.repository}:{followed.ref.tag} {auth} -> "
                f"{resolution.digest[:19]}…",
            )
        )
    return results + _registry_roles(seat)


def _registry_roles(seat: Seat) -> list[Result]:
    """Each ``registries.<host>.ecr.role_arn``: may every function that reads registries assume it?
    The resolve above used your credentials, not theirs; the template grants ``sts:AssumeRole`` on
    the roles ``RegistryRoleArns`` lists, and on no other (IAM's policy simulator). The role's own
    trust policy, in its account, is not part of this answer."""
    roles = {
        host: registry.ecr.role_arn
        for host, registry in sorted(seat.config.registries.items())
        if registry.ecr is not None and registry.ecr.role_arn
    }
    results = []
    for host, role_arn in roles.items():
        subject = f"{host}: {role_arn}"
        if seat.local:
            results.append(Result("registry", subject, Status.SKIP, "not checked locally: no IAM"))
            continue
        fix = (
            f"set the stack's RegistryRoleArns parameter to every registries.*.ecr.role_arn "
            f"({','.join(sorted(set(roles.values())))}) in samconfig.toml's parameter_overrides, or "
            "with sam deploy --guided, and deploy (docs/registries.md; docs/deploying.md, Upgrading)"
        )
        try:
            denied = [
                function
                for function in REGISTRY_READERS
                if (role := seat.roles.get(function)) is not None
                and not allowed_by_iam(role, "sts:AssumeRole", role_arn)
            ]
        except Exception as exc:
            results.append(
                Result(
                    "registry",
                    subject,
                    Status.WARN,
                    f"not checked: {short(exc)}",
                    "give the doctor iam:SimulatePrincipalPolicy (docs/troubleshooting.md)",
                )
            )
            continue
        if denied:
            results.append(
                Result(
                    "registry",
                    subject,
                    Status.FAIL,
                    f"{', '.join(denied)} may not assume it (sts:AssumeRole, IAM policy simulator): "
                    f"{host} cannot be read by them",
                    fix,
                )
            )
        else:
            results.append(
                Result(
                    "registry",
                    subject,
                    Status.OK,
                    f"assumable by {', '.join(REGISTRY_READERS)} (IAM policy simulator; its trust "
                    "policy is checked by the resolve above only for you)",
                )
            )
    return results
