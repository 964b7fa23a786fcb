"""Image reference parsing; cases from distribution/reference normalize_test.go and reference_test.go."""

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tagpin.domain.refs import ImageRef, InvalidReference, familiar, is_digest

D = "sha256:" + "f" * 64
BUSYBOX_DIGEST = "sha256:e6693c20186f837fc393390135d8a598a96a833917917789d63766cab6c59582"
D512 = "sha512:" + "f" * 128

# input -> (registry, repository, tag, digest)
VALID_REFS = {
    # TestParseDockerRef (tag kept alongside the digest: tagpin pins "name:tag@digest")
    "busybox": ("docker.io", "library/busybox", "latest", None),
    "busybox:latest": ("docker.io", "library/busybox", "latest", None),
    f"busybox@{BUSYBOX_DIGEST}": ("docker.io", "library/busybox", None, BUSYBOX_DIGEST),
    "library/busybox": ("docker.io", "library/busybox", "latest", None),
    "docker.io/busybox": ("docker.io", "library/busybox", "latest", None),
    "docker.io/library/busybox": ("docker.io", "library/busybox", "latest", None),
    "docker.io/busybox:latest": ("docker.io", "library/busybox", "latest", None),
    "gcr.io/library/busybox": ("gcr.io", "library/busybox", "latest", None),
    f"gcr.io/library/busybox:latest@{BUSYBOX_DIGEST}": (
        "gcr.io",
        "library/busybox",
        "latest",
        BUSYBOX_DIGEST,
    ),
    f"busybox:latest@{BUSYBOX_DIGEST}": ("docker.io", "library/busybox", "latest", BUSYBOX_DIGEST),
    # TestParseRepositoryInfo
    "fooo/bar": ("docker.io", "fooo/bar", "latest", None),
    "index.docker.io/fooo/bar": ("docker.io", "fooo/bar", "latest", None),
    "index.docker.io/debian": ("docker.io", "library/debian", "latest", None),
    "nonlibrary/ubuntu": ("docker.io", "nonlibrary/ubuntu", "latest", None),
    "other/library": ("docker.io", "other/library", "latest", None),
    "127.0.0.1:8000/private/moonbase": ("127.0.0.1:8000", "private/moonbase", "latest", None),
    "127.0.0.1:8000/privatebase": ("127.0.0.1:8000", "privatebase", "latest", None),
    "example.com:8000/privatebasee": ("example.com:8000", "privatebasee", "latest", None),
    "ubuntu-12.04-base": ("docker.io", "library/ubuntu-12.04-base", "latest", None),
    "docker.io/library/foo/bar": ("docker.io", "library/foo/bar", "latest", None),
    "store/foo/bar": ("docker.io", "store/foo/bar", "latest", None),
    "Foo/bar": ("Foo", "bar", "latest", None),
    "FOO/bar": ("FOO", "bar", "latest", None),
    "Docker/docker": ("Docker", "docker", "latest", None),
    # TestNormalizedSplitHostname
    "test.com/foo": ("test.com", "foo", "latest", None),
    "test_com/foo": ("docker.io", "test_com/foo", "latest", None),
    "docker/migrator": ("docker.io", "docker/migrator", "latest", None),
    "test.com:8080/foo": ("test.com:8080", "foo", "latest", None),
    "test-com:8080/foo": ("test-com:8080", "foo", "latest", None),
    "xn--n3h.com:18080/foo": ("xn--n3h.com:18080", "foo", "latest", None),
    # TestValidateReferenceName / TestValidateRemoteName
    "192.168.0.1": ("docker.io", "library/192.168.0.1", "latest", None),
    "192.168.0.1:80": ("docker.io", "library/192.168.0.1", "80", None),
    "192.168.0.1:8/debian": ("192.168.0.1:8", "debian", "latest", None),
    "[fc00::1]:5000/docker": ("[fc00::1]:5000", "docker", "latest", None),
    "[fc00:1:2:3:4:5:6:7]:5000/library/debian": (
        "[fc00:1:2:3:4:5:6:7]:5000",
        "library/debian",
        "latest",
        None,
    ),
    "docker.io/1a3f5e7d9c1b3a5f7e9d1c3b5a7f9e1d3c5b7a9f1e3d5d7c9b1a3f5e7d9c1b3a": (
        "docker.io",
        "library/1a3f5e7d9c1b3a5f7e9d1c3b5a7f9e1d3c5b7a9f1e3d5d7c9b1a3f5e7d9c1b3a",
        "latest",
        None,
    ),
    "docker---rules/docker": ("docker.io", "docker---rules/docker", "latest", None),
    "dock__er/docker": ("docker.io", "dock__er/docker", "latest", None),
    "d/docker": ("docker.io", "d/docker", "latest", None),
    # TestReferenceParse
    "test.com:5000": ("docker.io", "library/test.com", "5000", None),
    "test:5000/repo": ("test:5000", "repo", "latest", None),
    f"test:5000/repo@{D}": ("test:5000", "repo", None, D),
    f"test:5000/repo:tag@{D}": ("test:5000", "repo", "tag", D),
    "lowercase:Uppercase": ("docker.io", "library/lowercase", "Uppercase", None),
    "b.gcr.io/test.example.com/my-app:test.example.com": (
        "b.gcr.io",
        "test.example.com/my-app",
        "test.example.com",
        None,
    ),
    f"xn--7o8h.com/myimage:xn--7o8h.com@{D512}": ("xn--7o8h.com", "myimage", "xn--7o8h.com", D512),
    "foo_bar.com:8080": ("docker.io", "library/foo_bar.com", "8080", None),
    "foo/foo_bar.com:8080": ("docker.io", "foo/foo_bar.com", "8080", None),
    "192.168.1.1:5000/repo:5050": ("192.168.1.1:5000", "repo", "5050", None),
    "[2001:db8::1]/repo": ("[2001:db8::1]", "repo", "latest", None),
    "[2001:db8::1]:5000/repo:tag": ("[2001:db8::1]:5000", "repo", "tag", None),
    "[::1]:5000/repo": ("[::1]:5000", "repo", "latest", None),
    "sub-dom1.foo.com/bar/baz/quux:some-long-tag": (
        "sub-dom1.foo.com",
        "bar/baz/quux",
        "some-long-tag",
        None,
    ),
    # localhost: a host only when followed by a path
    "localhost/app": ("localhost", "app", "latest", None),
    "localhost:5000/x": ("localhost:5000", "x", "latest", None),
    "localhost": ("docker.io", "library/localhost", "latest", None),
    # other digest algorithms follow the grammar
    "repo@blake3:" + "a" * 64: ("docker.io", "library/repo", None, "blake3:" + "a" * 64),
    # reference-notes examples
    "ghcr.io/org/app": ("ghcr.io", "org/app", "latest", None),
    "org/app": ("docker.io", "org/app", "latest", None),
    ("a/" * 127) + "a:tag-puts-this-over-max": (
        "docker.io",
        ("a/" * 127) + "a",
        "tag-puts-this-over-max",
        None,
    ),
}

INVALID_REFS = {
    "": "at least one component",
    ":justtag": "invalid reference format",
    f"@{D}": "invalid reference format",
    "repo@sha256:" + "f" * 34: "exactly 64",
    "repo@sha256:" + "F" * 64: "lowercase hex",
    "repo@sha256:abc": "at least 32 hex",
    "Uppercase:tag": "must be lowercase",
    "test:5000/Uppercase/lowercase:tag": "must be lowercase",
    "docker/Docker": "must be lowercase",
    "docker.io/docker/Docker": "must be lowercase",
    ("a/" * 128) + "a:tag": "more than 255",
    "aa/asdf$$^/aa": "invalid reference format",
    "https://github.com/docker/docker": "invalid reference format",
    "-docker": "invalid reference format",
    "-docker/docker": "invalid reference format",
    "docker-/docker": "invalid reference format",
    "-docker.io/docker/docker": "invalid reference format",
    "docker///docker": "invalid reference format",
    "docker.io/docker///docker": "invalid reference format",
    "____/____": "invalid reference format",
    "dock..er/docker": "invalid reference format",
    "dock_.er/docker": "invalid reference format",
    "docker/": "invalid reference format",
    "[fc00::1]": "invalid reference format",
    "[fc00::1]:5000": "invalid reference format",
    "[2001:db8::1]:tag": "invalid reference format",
    "fc00::1:5000/debian": "invalid reference format",
    "[fe80::1%eth0]:5000/debian": "invalid reference format",
    "[2001:db8:3:4::192.0.2.33]:5000/debian": "invalid reference format",
    "1a3f5e7d9c1b3a5f7e9d1c3b5a7f9e1d3c5b7a9f1e3d5d7c9b1a3f5e7d9c1b3a": "image ID",
    "nginx:" + "t" * 129: "tag must match",
    "nginx:-tag": "tag must match",
    "nginx\n": "invalid reference format",
    "ngïnx": "invalid reference format",
    "a_b.com/foo": "invalid registry host",
    "_".join(["this_is_not_a_valid_namespace_because_its_lenth_is_greater_than_255"] * 4)
    + "/docker": "more than 255",
}


@pytest.mark.parametrize(("text", "expected"), VALID_REFS.items(), ids=lambda v: str(v)[:60])
def test_valid_references(text: str, expected: tuple[str, str, str | None, str | None]) -> None:
    ref = ImageRef.parse(text)
    assert (ref.registry, ref.repository, ref.tag, ref.digest) == expected
    assert ImageRef.parse(str(ref)) == ref


@pytest.mark.parametrize(("text", "message"), INVALID_REFS.items(), ids=lambda v: str(v)[:60])
def test_invalid_references(text: str, message: str) -> None:
    with pytest.raises(InvalidReference) as info:
        ImageRef.parse(text)
    assert message in str(info.value)
    assert repr(text[:50])[:-1] in str(info.value)  # the input is quoted


def test_properties_and_str() -> None:
    ref = ImageRef.parse("nginx:1.27")
    assert ref.name == "docker.io/library/nginx"
    assert ref.tagged == "docker.io/library/nginx:1.27"
    assert str(ref) == "docker.io/library/nginx:1.27"
    assert familiar(ref) == ref.familiar == "nginx:1.27"
    pinned = ref.with_digest(D)
    assert str(pinned) == f"docker.io/library/nginx:1.27@{D}"
    assert pinned.tag == "1.27"
    assert pinned.tagged == ref.tagged
    assert familiar(pinned) == f"nginx:1.27@{D}"
    assert ImageRef.parse("docker.io/library/foo/bar").familiar == "library/foo/bar:latest"
    assert ImageRef.parse("ghcr.io/o/a:1").familiar == "ghcr.io/o/a:1"
    assert ImageRef.parse("index.docker.io/org/app").familiar == "org/app:latest"


def test_tagged_requires_tag_and_with_digest_validates() -> None:
    digested = ImageRef.parse(f"nginx@{D}")
    assert digested.tag is None
    with pytest.raises(ValueError, match="no tag"):
        _ = digested.tagged
    with pytest.raises(InvalidReference, match="exactly 64"):
        ImageRef.parse("nginx").with_digest("sha256:" + "ab" * 20)
    assert ImageRef.parse("nginx").with_tag("stable").tag == "stable"
    with pytest.raises(InvalidReference):
        ImageRef.parse("nginx").with_tag(".bad")


def test_frozen_and_hashable() -> None:
    ref = ImageRef.parse("nginx")
    with pytest.raises(AttributeError):
        ref.tag = "x"  # type: ignore[misc]
    assert {ref, ImageRef.parse("docker.io/library/nginx:latest")} == {ref}


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        (D, True),
        (D512, True),
        ("sha256:" + "f" * 63, False),
        ("sha256:" + "F" * 64, False),
        ("sha384:" + "a" * 96, True),
        ("multihash+base58:" + "a" * 32, True),
        ("sha256", False),
        ("1sha:" + "a" * 64, False),
        ("", False),
        (D + "\n", False),
    ],
)
def test_is_digest(text: str, ok: bool) -> None:
    assert is_digest(text) is ok


# --- properties ----------------------------------------------------------------------------------

_alnum = st.from_regex(r"[a-z0-9]{1,8}", fullmatch=True)
_sep = st.sampled_from([".", "_", "__", "-", "--"])
_component = st.builds(
    lambda first, rest: first + "".join(s + a for s, a in rest),
    _alnum,
    st.lists(st.tuples(_sep, _alnum), max_size=2),
)
_path = st.lists(_component, min_size=1, max_size=4).map("/".join)
_host = st.one_of(
    st.sampled_from(
        ["docker.io", "index.docker.io", "ghcr.io", "localhost", "127.0.0.1:5000", "[::1]:5000", "Reg"]
    ),
    st.from_regex(r"[a-z][a-z0-9-]{0,10}[a-z0-9]\.[a-z]{2,5}(:[0-9]{1,5})?", fullmatch=True),
)
_tag = st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,20}", fullmatch=True)
_digest = st.from_regex(r"[a-f0-9]{64}", fullmatch=True).map(lambda h: f"sha256:{h}")
_text = st.builds(
    lambda host, path, tag, digest: (
        (f"{host}/" if host else "") + path + (f":{tag}" if tag else "") + (f"@{digest}" if digest else "")
    ),
    st.none() | _host,
    _path,
    st.none() | _tag,
    st.none() | _digest,
)


@given(_text)
def test_roundtrip(text: str) -> None:
    try:
        ref = ImageRef.parse(text)
    except InvalidReference:
        return  # e.g. a generated path that is a bare 64-hex identifier, or a name over 255 characters
    assert ImageRef.parse(str(ref)) == ref
    assert ImageRef.parse(familiar(ref)) == ref
    assert ref.tag is not None or ref.digest is not None


@given(st.text(max_size=80) | st.from_regex(r"[A-Za-z0-9./:@_\[\]-]{0,60}", fullmatch=True))
def test_parse_only_raises_invalid_reference(text: str) -> None:
    try:
        ref = ImageRef.parse(text)
    except InvalidReference as exc:
        assert repr(text[:40])[1:-1][:20] in str(exc) or len(text) > 300
        return
    assert ImageRef.parse(str(ref)) == ref
