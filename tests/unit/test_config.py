"""Configuration: YAML parsing, validation messages naming the field, and the cached loader."""

from __future__ import annotations

import textwrap

import boto3
import pytest
from aws_lambda_powertools.utilities import parameters
from tagpin.adapters import config_source as config_module
from tagpin.adapters.config_source import ConfigLoader
from tagpin.domain.config import (
    ConfigError,
    Kind,
    TagpinConfig,
    parse_config,
)

VALID = textwrap.dedent(
    """
    clusters:
      dev:
        eks: {name: dev-cluster, region: eu-west-1}
      stage:
        kubeconfig: {secret: tagpin/clusters/stage, context: stage}
    registries:
      127.0.0.1:5000: {insecure: true}
      ghcr.io: {credentials_secret: tagpin/registries/ghcr}
    images:
      - image: nginx
        targets:
          - {cluster: dev, name: web, container: nginx}
      - image: 127.0.0.1:5000/demo/web:stable
        targets:
          - {cluster: dev, namespace: demo, name: web, container: app}
          - {cluster: stage, namespace: jobs, kind: CronJob, name: nightly, container: app}
    """
)


def _doc(images: str, clusters: str = "clusters:\n  dev:\n    eks: {name: dev, region: us-east-1}\n") -> str:
    return clusters + images


def _one_image(image: str = "nginx:1.27", **target: str) -> str:
    fields = {"cluster": "dev", "name": "web", "container": "app", **target}
    inline = ", ".join(f"{k}: {v!r}" for k, v in fields.items())
    return f"images:\n  - image: {image!r}\n    targets:\n      - {{{inline}}}\n"


def test_valid_document_parses() -> None:
    cfg = parse_config(VALID)
    assert isinstance(cfg, TagpinConfig)
    assert set(cfg.clusters) == {"dev", "stage"}
    assert cfg.clusters["dev"].eks is not None
    assert cfg.clusters["dev"].eks.region == "eu-west-1"
    assert cfg.clusters["stage"].kubeconfig is not None
    assert cfg.clusters["stage"].kubeconfig.secret == "tagpin/clusters/stage"
    assert cfg.registry("127.0.0.1:5000").insecure is True
    assert cfg.registry("ghcr.io").credentials_secret == "tagpin/registries/ghcr"
    assert cfg.registry("quay.io").insecure is False  # unknown hosts: anonymous, TLS
    web = cfg.followed["127.0.0.1:5000/demo/web:stable"]
    assert [t.id for t in web.targets] == [
        "dev/demo/Deployment/web/app",
        "stage/jobs/CronJob/nightly/app",
    ]
    assert web.targets[1].kind is Kind.CRONJOB
    assert web.ref.registry == "127.0.0.1:5000"
    assert web.ref.tag == "stable"


def test_followed_keys_are_canonical() -> None:
    cfg = parse_config(VALID)
    assert list(cfg.followed) == ["docker.io/library/nginx:latest", "127.0.0.1:5000/demo/web:stable"]
    nginx = cfg.followed["docker.io/library/nginx:latest"]
    assert nginx.image == "docker.io/library/nginx:latest"
    assert nginx.targets[0].namespace == "default"
    assert nginx.targets[0].kind is Kind.DEPLOYMENT
    assert nginx.targets[0].id == "dev/default/Deployment/web/nginx"


def test_empty_document_is_an_empty_config() -> None:
    cfg = parse_config("")
    assert cfg.images == [] and cfg.clusters == {} and cfg.followed == {}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            _doc(_one_image(cluster="prod")),
            "images.0.targets.0.cluster: unknown cluster 'prod' (known: dev)",
            id="unknown-cluster",
        ),
        pytest.param(
            _doc(
                _one_image(),
                clusters="clusters:\n  dev:\n    eks: {name: dev, region: us-east-1}\n"
                "    kubeconfig: {file: /tmp/kc}\n",
            ),
            "clusters.dev: give exactly one of 'eks', 'kubeconfig' or 'service_account'",
            id="eks-and-kubeconfig",
        ),
        pytest.param(
            _doc(_one_image(), clusters="clusters:\n  dev: {}\n"),
            "clusters.dev: give exactly one of 'eks', 'kubeconfig' or 'service_account'",
            id="no-access",
        ),
        pytest.param(
            _doc(_one_image(namespace="Bad_NS")),
            "images.0.targets.0.namespace",
            id="bad-namespace",
        ),
        pytest.param(
            _doc(_one_image(image="nginx@sha256:" + "a" * 64)),
            "images.0.image",
            id="digest-pinned",
        ),
        pytest.param(
            _doc(_one_image(image="nginx:1.27@sha256:" + "a" * 64)),
            "is pinned to a digest",
            id="tag-and-digest",
        ),
        pytest.param(
            _doc(_one_image(image="nginx") + _one_image(image="docker.io/library/nginx:latest")[8:]),
            "images.1.image: docker.io/library/nginx:latest is listed twice",
            id="duplicate-image",
        ),
        pytest.param(
            _doc(_one_image(image="NGINX")),
            "images.0.image",
            id="invalid-reference",
        ),
        pytest.param(_doc(_one_image(kind="Pod")), "images.0.targets.0.kind", id="unknown-kind"),
        pytest.param(
            _doc(_one_image(), clusters="clusters:\n  dev:\n    eks: {name: dev, region: nowhere}\n"),
            "clusters.dev.eks.region",
            id="bad-region",
        ),
        pytest.param(
            _doc("images:\n  - image: nginx\n    targets: []\n"),
            "images.0.targets",
            id="no-targets",
        ),
        pytest.param("clusters: [\n", "not valid YAML", id="not-yaml"),
        pytest.param("- just\n- a list\n", "must be a mapping", id="not-a-mapping"),
        pytest.param("just a string\n", "must be a mapping", id="scalar"),
        pytest.param(_doc(_one_image()) + "surprise: 1\n", "surprise", id="unknown-top-level-key"),
        pytest.param(
            _doc(_one_image(replicas="3")),
            "images.0.targets.0.replicas",
            id="unknown-target-key",
        ),
        pytest.param(
            _doc(_one_image(), clusters="clusters:\n  dev:\n    kubeconfig: {context: x}\n"),
            "clusters.dev.kubeconfig: give exactly one of 'secret' or 'file'",
            id="kubeconfig-without-source",
        ),
    ],
)
def test_invalid_documents_name_the_field(text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(text, source="tagpin.yaml")
    message = str(info.value)
    assert message.startswith("tagpin.yaml: ")
    assert expected in message


def test_unknown_key_error_says_extra() -> None:
    with pytest.raises(ConfigError, match=r"images\.0\.targets\.0\.replicas: Extra inputs are not permitted"):
        parse_config(_doc(_one_image(replicas="3")))


def test_several_errors_are_all_reported() -> None:
    text = _doc(
        "images:\n"
        "  - image: nginx\n"
        "    targets:\n"
        "      - {cluster: dev, namespace: Bad_NS, name: web, container: Bad_Container}\n"
    )
    with pytest.raises(ConfigError) as info:
        parse_config(text)
    assert "images.0.targets.0.namespace" in str(info.value)
    assert "images.0.targets.0.container" in str(info.value)


def test_config_error_is_a_value_error() -> None:
    assert issubclass(ConfigError, ValueError)


# -- loader -----------------------------------------------------------------------------------------


def _count_parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    real = config_module.parse_config

    def counting(text: str | bytes, *, source: str = "configuration") -> TagpinConfig:
        calls.append(source)
        return real(text, source=source)

    monkeypatch.setattr(config_module, "parse_config", counting)
    return calls


def test_loader_needs_exactly_one_source() -> None:
    with pytest.raises(ConfigError, match="exactly one"):
        ConfigLoader()
    with pytest.raises(ConfigError, match="exactly one"):
        ConfigLoader(parameter="/tagpin/config", file="tagpin.yaml")


def test_file_loader_caches_until_the_text_changes(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _count_parses(monkeypatch)
    path = tmp_path / "tagpin.yaml"
    path.write_text(VALID, encoding="utf-8")
    loader = ConfigLoader(file=str(path))

    first = loader.load()
    second = loader.load()
    assert second is first
    assert calls == [str(path)]

    path.write_text(VALID.replace("image: nginx\n", "image: nginx:1.27\n"), encoding="utf-8")
    third = loader.load()
    assert third is not first
    assert "docker.io/library/nginx:1.27" in third.followed
    assert "docker.io/library/nginx:latest" not in third.followed
    assert len(calls) == 2
    assert loader.load() is third
    assert len(calls) == 2


def test_file_loader_reports_the_file_name(tmp_path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("images: 3\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"broken\.yaml: images"):
        ConfigLoader(file=str(path)).load()


def test_ssm_parameter_loader(aws, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _count_parses(monkeypatch)
    ssm = boto3.client("ssm")
    ssm.put_parameter(Name="/tagpin/config", Value=VALID, Type="String")

    cached = ConfigLoader(parameter="/tagpin/config", max_age=60)
    cfg = cached.load()
    assert set(cfg.followed) == {"docker.io/library/nginx:latest", "127.0.0.1:5000/demo/web:stable"}
    assert cached.load() is cfg
    assert calls == ["/tagpin/config"]

    changed = VALID.replace("127.0.0.1:5000/demo/web:stable", "127.0.0.1:5000/demo/web:canary")
    ssm.put_parameter(Name="/tagpin/config", Value=changed, Type="String", Overwrite=True)
    # Within max_age powertools answers from its cache: same text, same parsed object.
    assert cached.load() is cfg

    # Once powertools' cache expires, the new text is fetched and parsed once.
    parameters.clear_caches()
    reloaded = cached.load()
    assert reloaded is not cfg
    assert "127.0.0.1:5000/demo/web:canary" in reloaded.followed
    assert "127.0.0.1:5000/demo/web:stable" not in reloaded.followed
    assert len(calls) == 2
    assert cached.load() is reloaded


def test_ssm_parameter_invalid_names_the_parameter(aws) -> None:
    boto3.client("ssm").put_parameter(Name="/tagpin/bad", Value="- a\n- b\n", Type="String")
    with pytest.raises(ConfigError, match=r"^/tagpin/bad: the document must be a mapping"):
        ConfigLoader(parameter="/tagpin/bad").load()
