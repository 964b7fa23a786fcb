"""Properties of the GitOps edits over generated files (tagpin.domain.gitops.yamltext and the
three kinds of file), and the bounds on untrusted YAML from a Git server: size, nesting depth,
aliases, nodes; invalid YAML and edits that would change more than they set are refused with a
clear error, and nothing is edited."""

from __future__ import annotations

import json

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from tagpin.domain.gitops import helm, kustomize, manifest
from tagpin.domain.gitops.helm import ValuesPaths
from tagpin.domain.gitops.pins import Pin
from tagpin.domain.gitops.yamltext import (
    MAX_ALIASES,
    MAX_DEPTH,
    MAX_EVENTS,
    MAX_TEXT,
    EditError,
    plain,
    render,
)

WEB = "registry.example.com/team/web"
# OCI distribution tag grammar: [A-Za-z0-9_][A-Za-z0-9_.-]{0,127} (short ones are enough here)
tags = st.from_regex(r"\A[A-Za-z0-9_][A-Za-z0-9_.-]{0,15}\Z")
digests = st.text("0123456789abcdef", min_size=64, max_size=64).map(lambda h: f"sha256:{h}")
styles = st.sampled_from(["plain", "single", "double"])
comments = st.sampled_from(["", "  # pinned by tagpin", ' # {"note": "x"}', "    #tight"])
indents = st.sampled_from([2, 4])


def styled(value: str, style: str) -> str:
    if style == "single":
        return "'" + value.replace("'", "''") + "'"
    if style == "double" or not plain(value):
        return json.dumps(value)
    return value


def untouched(before: str, after: str, changed: int) -> None:
    """All lines but ``changed`` of them (edited in place) are byte for byte the same."""
    old, new = before.splitlines(keepends=True), after.splitlines(keepends=True)
    assert len(old) == len(new)
    assert sum(a != b for a, b in zip(old, new, strict=True)) <= changed


@settings(max_examples=150, deadline=None)
@given(tags, tags, digests, digests, styles, comments, indents)
def test_kustomize_property(
    old_tag: str, tag: str, old: str, new: str, style: str, comment: str, n: int
) -> None:
    i = " " * n
    text = (
        f"# generated\nresources:\n{i}- deploy.yaml\nimages:\n{i}- name: web{comment}\n"
        f"{i}  newName: {WEB}\n{i}  newTag: {styled(old_tag, style)}{comment}\n"
        f"{i}  digest: {old}{comment}\n{i}- name: other\n{i}  newTag: {styled(old_tag, style)}\n"
    )
    pin = Pin.of(f"{WEB}:{tag}", new)
    edit = kustomize.edit(text, pin)
    data = yaml.safe_load(edit.text)
    assert data["images"][0] == {"name": "web", "newName": WEB, "newTag": tag, "digest": new}
    assert data["images"][1] == yaml.safe_load(text)["images"][1]
    untouched(text, edit.text, changed=2)
    assert edit.changed == ((old_tag, old) != (tag, new))
    assert not kustomize.edit(edit.text, pin).changed


@settings(max_examples=150, deadline=None)
@given(tags, tags, digests, styles, comments, st.booleans())
def test_helm_property(
    old_tag: str, tag: str, new: str, style: str, comment: str, digest_field: bool
) -> None:
    text = f"image:\n  repository: {WEB}{comment}\n  tag: {styled(old_tag, style)}{comment}\n"
    text += "  pullPolicy: Always\n"
    pin = Pin.of(f"{WEB}:{tag}", new)
    paths = ValuesPaths(
        tag="image.tag", repository="image.repository", digest="image.digest" if digest_field else None
    )
    edit = helm.edit(text, pin, paths)
    image = yaml.safe_load(edit.text)["image"]
    if digest_field:
        assert image == {"repository": WEB, "tag": tag, "digest": new, "pullPolicy": "Always"}
        assert edit.text.splitlines()[3] == f"  digest: {new}"  # added just below the tag
    else:
        assert image == {"repository": WEB, "tag": f"{tag}@{new}", "pullPolicy": "Always"}
        untouched(text, edit.text, changed=1)
    assert not helm.edit(edit.text, pin, paths).changed


@settings(max_examples=150, deadline=None)
@given(tags, tags, digests, styles, comments, st.booleans())
def test_manifest_property(
    old_tag: str, tag: str, new: str, style: str, comment: str, by_marker: bool
) -> None:
    marker = ' # {"$tagpin": "web"}' if by_marker else comment
    text = (
        "kind: Deployment\nspec:\n  template:\n    spec:\n      containers:\n"
        f"        - image: {styled(f'{WEB}:{old_tag}', style)}{marker}\n"
        f"        - image: {WEB}-proxy:{old_tag}{comment}\n"
    )
    pin = Pin.of(f"{WEB}:{tag}", new)
    edit = manifest.edit_by_marker(text, pin, "web") if by_marker else manifest.edit_by_name(text, pin)
    first, second = yaml.safe_load(edit.text)["spec"]["template"]["spec"]["containers"]
    assert first == {"image": f"{WEB}:{tag}@{new}"} and second == {"image": f"{WEB}-proxy:{old_tag}"}
    untouched(text, edit.text, changed=1)
    again = (
        manifest.edit_by_marker(edit.text, pin, "web") if by_marker else manifest.edit_by_name(edit.text, pin)
    )
    assert not again.changed and again.text == edit.text


@given(st.text(st.characters(codec="utf-8"), max_size=40), styles)
def test_any_value_rendered_reads_back_as_itself(value: str, style: str) -> None:
    """Whatever a tag or digest looks like (``1.10``, ``true``, ``null``, ``#x``), the text
    written reads back as that string, in the original's quoting where it has one."""
    node = yaml.compose(f"k: {styled('x', style)}").value[0][1]
    try:
        written = render(node, value)
    except EditError:
        return
    assert yaml.safe_load(f"k: {written}") == {"k": value}


# -- untrusted YAML: bounds and clear errors --------------------------------------------------

PIN = Pin.of(f"{WEB}:1.4", "sha256:" + "a" * 64)


def test_a_file_larger_than_the_bound_is_refused() -> None:
    text = f"image: {WEB}:1\n" + "#" * MAX_TEXT
    with pytest.raises(EditError, match=rf"the file has {len(text)} characters, more than the {MAX_TEXT}"):
        manifest.edit_by_name(text, PIN)


def test_nesting_deeper_than_the_bound_is_refused_before_it_is_composed() -> None:
    deep = "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1)
    with pytest.raises(EditError, match=f"nested more than {MAX_DEPTH} levels deep"):
        manifest.edit_by_name(f"image: {WEB}:1\nx: {deep}\n", PIN)
    very = "[" * 100_000  # would exhaust the recursion of a composer that went first
    with pytest.raises(EditError, match="nested more than"):
        manifest.edit_by_name(very, PIN)
    fits = "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1)
    assert manifest.edit_by_name(f"image: {WEB}:1\nx: {fits}\n", PIN).changed


def test_an_alias_bomb_is_refused() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 20)]
    with pytest.raises(EditError, match=f"more than {MAX_ALIASES} aliases"):
        manifest.edit_by_name("\n".join(lines) + f"\nimage: {WEB}:1\n", PIN)


def test_too_many_nodes_are_refused() -> None:
    text = f"image: {WEB}:1\nxs: [" + ",".join(["1"] * MAX_EVENTS) + "]\n"
    assert len(text) < MAX_TEXT
    with pytest.raises(EditError, match=f"more than {MAX_EVENTS} YAML nodes"):
        manifest.edit_by_name(text, PIN)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("images: [\n", r"not valid YAML: .* \(line 2\)"),
        ("a: b\n  c: d\n", r"not valid YAML: .* \(line 2\)"),
        ("images: !!python/object:os.system x\n", r"not valid YAML"),
    ],
)
def test_invalid_yaml_is_refused_with_its_line(text: str, message: str) -> None:
    with pytest.raises(EditError, match=message):
        kustomize.edit(text, PIN)


def test_an_edit_that_would_move_an_alias_too_is_refused() -> None:
    text = f"a:\n  image: &img {WEB}:1.3\nb:\n  image: *img\n"
    with pytest.raises(EditError, match="would change more than the values it sets"):
        manifest.edit_by_name(text, PIN)


def test_an_anchor_or_a_tag_on_the_value_stays() -> None:
    text = f"image: &img !!str {WEB}:1.3 # x\n"
    assert manifest.edit_by_name(text, PIN).text == f"image: &img !!str {WEB}:1.4@{PIN.digest} # x\n"


def test_a_secret_looking_value_is_not_echoed_beyond_the_path() -> None:
    """Errors name the file's path and line, not the contents of unrelated values."""
    text = "token: ghp_s3cr3t\nimages: [\n"
    with pytest.raises(EditError) as raised:
        kustomize.edit(text, PIN)
    assert "ghp_s3cr3t" not in str(raised.value)
