"""GitOps write-back edits, one kind of file at a time (tagpin.domain.gitops): a Kustomize
``images:`` entry, Helm values paths, a plain manifest's image found by name and by a marker
comment. Each edit changes the values it sets and not one other byte, writes ``tag@sha256:``
(or the tag and the digest each in its field), and is idempotent: the same digest twice is no
change, so no empty commit."""

from __future__ import annotations

import difflib

import pytest
from tagpin.domain.gitops import helm, kustomize, manifest
from tagpin.domain.gitops.helm import ValuesPaths
from tagpin.domain.gitops.pins import Pin
from tagpin.domain.gitops.yamltext import Edit, EditError
from tagpin.domain.refs import ImageRef

OLD = "sha256:" + "0" * 64
NEW = "sha256:" + "a" * 64
WEB = "registry.example.com/team/web"
PIN = Pin.of(f"{WEB}:1.4", NEW)


def changed_lines(before: str, after: str) -> list[tuple[str, str]]:
    """(old line, new line) of every line that differs; lines added are paired with ''."""
    out = []
    matcher = difflib.SequenceMatcher(a=before.splitlines(), b=after.splitlines(), autojunk=False)
    for op, a0, a1, b0, b1 in matcher.get_opcodes():
        if op != "equal":
            old, new = before.splitlines()[a0:a1], after.splitlines()[b0:b1]
            out += [(o, n) for o, n in zip(old + [""] * len(new), new + [""] * len(old), strict=False)]
    return [(o, n) for o, n in out if (o, n) != ("", "")]


def idempotent(edit: Edit, again: Edit) -> None:
    assert edit.changed
    assert not again.changed and again.text == edit.text


KUSTOMIZATION = """\
# apps/web: the web front end
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - deploy.yaml   # the Deployment

images:
  - name: web        # the placeholder in deploy.yaml
    newName: registry.example.com/team/web
    newTag: "1.3"
  - name: worker
    newName: registry.example.com/team/worker
    newTag: v2 # not ours
"""


def test_kustomize_entry_gets_the_tag_and_the_digest_and_nothing_else_moves() -> None:
    edit = kustomize.edit(KUSTOMIZATION, PIN)
    assert changed_lines(KUSTOMIZATION, edit.text) == [
        ('    newTag: "1.3"', '    newTag: "1.4"'),
        ("", f"    digest: {NEW}"),
    ]
    assert [(c.path, c.line, c.old, c.new) for c in edit.changes] == [
        ("images[0].newTag", 10, "1.3", "1.4"),
        ("images[0].digest", 11, None, NEW),
    ]
    idempotent(edit, kustomize.edit(edit.text, PIN))


def test_kustomize_entry_already_pinned_moves_to_the_new_digest_in_place() -> None:
    text = f"images:\n- name: {WEB}\n  newTag: '1.3'\n  digest: {OLD}  # tagpin\n"
    edit = kustomize.edit(text, PIN)
    assert edit.text == f"images:\n- name: {WEB}\n  newTag: '1.4'\n  digest: {NEW}  # tagpin\n"
    idempotent(edit, kustomize.edit(edit.text, PIN))


def test_kustomize_one_field_form_stays_one_field() -> None:
    text = f"images:\n  - name: web\n    newName: {WEB}\n    newTag: 1.3@{OLD}\n"
    edit = kustomize.edit(text, PIN)
    assert edit.text == f"images:\n  - name: web\n    newName: {WEB}\n    newTag: 1.4@{NEW}\n"


def test_kustomize_entry_chosen_by_name_must_name_the_followed_repository() -> None:
    assert kustomize.edit(KUSTOMIZATION, PIN, name="web").changed
    with pytest.raises(EditError, match=r"images entry 'worker' names registry.example.com/team/worker"):
        kustomize.edit(KUSTOMIZATION, PIN, name="worker")
    with pytest.raises(EditError, match=r"no images: entry for registry.example.com/team/api"):
        kustomize.edit(KUSTOMIZATION, Pin.of("registry.example.com/team/api:1", NEW))


def test_kustomize_keeps_crlf_line_ends() -> None:
    text = KUSTOMIZATION.replace("\n", "\r\n")
    edit = kustomize.edit(text, PIN)
    assert "\n" not in edit.text.replace("\r\n", "")
    assert f'    newTag: "1.4"\r\n    digest: {NEW}\r\n' in edit.text


VALUES = """\
replicaCount: 2
image:
  repository: registry.example.com/team/web   # the chart adds nothing to it
  tag: 1.3 # kept by tagpin
  pullPolicy: IfNotPresent
sidecar:
  image: {repository: busybox, tag: "1.36"}
"""


def test_helm_tag_path_gets_tag_at_digest() -> None:
    paths = ValuesPaths(tag="image.tag", repository="image.repository")
    edit = helm.edit(VALUES, PIN, paths)
    assert changed_lines(VALUES, edit.text) == [
        ("  tag: 1.3 # kept by tagpin", f"  tag: 1.4@{NEW} # kept by tagpin")
    ]
    idempotent(edit, helm.edit(edit.text, PIN, paths))


def test_helm_tag_and_digest_paths_each_get_their_value_the_digest_added_beside_the_tag() -> None:
    paths = ValuesPaths(tag="image.tag", digest="image.digest")
    edit = helm.edit(VALUES, PIN, paths)
    # 1.4 unquoted would read back as a number: the tag is quoted so it stays the string "1.4"
    assert changed_lines(VALUES, edit.text) == [
        ("  tag: 1.3 # kept by tagpin", '  tag: "1.4" # kept by tagpin'),
        ("", f"  digest: {NEW}"),
    ]
    idempotent(edit, helm.edit(edit.text, PIN, paths))


def test_helm_paths_with_list_indexes_and_flow_mappings() -> None:
    text = f"containers:\n  - name: web\n    image: {{repository: {WEB}, tag: '1.3'}}\n"
    edit = helm.edit(
        text, PIN, ValuesPaths(tag="containers[0].image.tag", repository="containers[0].image.repository")
    )
    assert edit.text == f"containers:\n  - name: web\n    image: {{repository: {WEB}, tag: '1.4@{NEW}'}}\n"
    with pytest.raises(EditError, match=r"containers\[0\].image.digest: the mapping is in flow style"):
        helm.edit(text, PIN, ValuesPaths(tag="containers[0].image.tag", digest="containers[0].image.digest"))


@pytest.mark.parametrize(
    ("paths", "message"),
    [
        (ValuesPaths(tag="image.version"), r"image.version: not in the values file \(add it once"),
        (ValuesPaths(tag="image"), r"image: not a single value"),
        (
            ValuesPaths(tag="sidecar.image.tag", repository="sidecar.image.repository"),
            r"not the followed repository",
        ),
        (
            ValuesPaths(tag="image.tag", repository="image.registry"),
            r"image.registry: not in the values file",
        ),
        (ValuesPaths(tag="image.tag", digest="other.digest"), r"other.digest: not in the values file"),
    ],
)
def test_helm_paths_that_do_not_fit_the_file_are_refused(paths: ValuesPaths, message: str) -> None:
    with pytest.raises(EditError, match=message):
        helm.edit(VALUES, PIN, paths)


def test_helm_values_path_syntax() -> None:
    assert helm.parse_path("a.b[0][2].c") == ("a", "b", 0, 2, "c")
    for bad in ("", "a..b", "a[x]", ".a", "a b"):
        with pytest.raises(ValueError, match="a values path is dotted keys"):
            helm.parse_path(bad)


MANIFEST = f"""\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  template:
    spec:
      containers:
        - name: web
          image: {WEB}:1.3   # moved by tagpin
        - name: proxy
          image: registry.example.com/team/web-proxy:1.3
---
# a second document, another indentation
kind: CronJob
spec:
    jobTemplate:
        spec:
            template:
                spec:
                    containers:
                    -   image: "{WEB}@{OLD}"
"""


def test_manifest_image_found_by_name_in_every_document() -> None:
    edit = manifest.edit_by_name(MANIFEST, PIN)
    assert changed_lines(MANIFEST, edit.text) == [
        (
            f"          image: {WEB}:1.3   # moved by tagpin",
            f"          image: {WEB}:1.4@{NEW}   # moved by tagpin",
        ),
        (
            f'                    -   image: "{WEB}@{OLD}"',
            f'                    -   image: "{WEB}:1.4@{NEW}"',
        ),
    ]
    assert [c.path for c in edit.changes] == [
        "spec.template.spec.containers[0].image",
        "(document 2) spec.jobTemplate.spec.template.spec.containers[0].image",
    ]
    idempotent(edit, manifest.edit_by_name(edit.text, PIN))


def test_manifest_keeps_the_repository_as_written() -> None:
    text = "containers:\n- image: nginx  # docker.io/library/nginx\n- image: docker.io/library/nginx:1.25\n"
    edit = manifest.edit_by_name(text, Pin.of("docker.io/library/nginx:1.27", NEW))
    assert edit.text == (
        f"containers:\n- image: nginx:1.27@{NEW}  # docker.io/library/nginx\n"
        f"- image: docker.io/library/nginx:1.27@{NEW}\n"
    )
    port = "localhost:5000/team/web:1@" + OLD
    moved = manifest.edit_by_name(f"image: {port}\n", Pin.of("localhost:5000/team/web:2", NEW))
    assert moved.text == f"image: localhost:5000/team/web:2@{NEW}\n"


def test_manifest_without_the_image_is_an_error_not_a_guess() -> None:
    with pytest.raises(EditError, match=r"no image: field names registry.example.com/team/api"):
        manifest.edit_by_name(MANIFEST, Pin.of("registry.example.com/team/api:1", NEW))


MARKED = f"""\
spec:
  image: {WEB}:1.3 # {{"$tagpin": "web"}}
  values:
    tag: "1.3"   #{{"$tagpin":"web:tag"}}
    digest: {OLD} # {{"$tagpin": "web:digest"}}
    other: registry.example.com/team/api:1.3 # {{"$tagpin": "api"}}
    plain: {WEB}:1.3
"""


def test_manifest_values_found_by_marker_comment() -> None:
    edit = manifest.edit_by_marker(MARKED, PIN, "web")
    assert changed_lines(MARKED, edit.text) == [
        (f'  image: {WEB}:1.3 # {{"$tagpin": "web"}}', f'  image: {WEB}:1.4@{NEW} # {{"$tagpin": "web"}}'),
        ('    tag: "1.3"   #{"$tagpin":"web:tag"}', '    tag: "1.4"   #{"$tagpin":"web:tag"}'),
        (
            f'    digest: {OLD} # {{"$tagpin": "web:digest"}}',
            f'    digest: {NEW} # {{"$tagpin": "web:digest"}}',
        ),
    ]
    idempotent(edit, manifest.edit_by_marker(edit.text, PIN, "web"))


def test_marked_tag_without_a_marked_digest_gets_tag_at_digest() -> None:
    text = 'tag: "1.3" # {"$tagpin": "web:tag"}\n'
    assert manifest.edit_by_marker(text, PIN, "web").text == f'tag: "1.4@{NEW}" # {{"$tagpin": "web:tag"}}\n'


@pytest.mark.parametrize(
    ("text", "marker", "message"),
    [
        (MARKED, "db", r'no value is marked # \{"\$tagpin": "db"\}'),
        (MARKED, "api", r"line 6: the value marked 'api' names .*not the followed repository"),
        (
            'x: 1 # {"$tagpin": "web:size"}\n',
            "web",
            r"line 1: marker 'web:size': after the name comes :tag or :digest",
        ),
        ('x: |\n  1.3\n# {"$tagpin": "web:tag"}\n', "web", r"line 1: a block scalar \(\|\) is not edited"),
    ],
)
def test_markers_that_do_not_fit_are_refused(text: str, marker: str, message: str) -> None:
    with pytest.raises(EditError, match=message):
        manifest.edit_by_marker(text, PIN, marker)


def test_pin_needs_a_tag_and_a_digest() -> None:
    with pytest.raises(ValueError, match="a reference written to Git needs a tag"):
        Pin(ImageRef.parse(f"{WEB}@{NEW}"))
    assert PIN.tag_at_digest == f"1.4@{NEW}" and PIN.name == WEB
    assert not PIN.matches(f"{WEB}-proxy:1.4") and not PIN.matches("team/web:1.4") and not PIN.matches(":::")


BACK = Pin(ImageRef.parse(f"{WEB}:1.3"))  # a revert to what the file said before: the tag alone


@pytest.mark.parametrize(
    ("before", "edit"),
    [
        (KUSTOMIZATION, lambda text, pin: kustomize.edit(text, pin)),  # tagpin adds a digest: taken out
        (
            f'image:\n  repository: {WEB}\n  tag: "1.3" # kept\n  pullPolicy: Always\n',
            lambda text, pin: helm.edit(text, pin, ValuesPaths(tag="image.tag", digest="image.digest")),
        ),
        ("image:\n  tag: v1.3\n", lambda text, pin: helm.edit(text, pin, ValuesPaths(tag="image.tag"))),
        (
            f"spec:\n  containers:\n    - name: web\n      image: {WEB}:1.3   # moved by tagpin\n",
            lambda text, pin: manifest.edit_by_name(text, pin),
        ),
        (f'image: {WEB}:1.3 # {{"$tagpin": "web"}}\ntag: "1.3" # {{"$tagpin": "web:tag"}}\n', None),
    ],
)
def test_a_revert_to_the_tag_alone_restores_the_file_byte_for_byte(before: str, edit: object) -> None:
    """The file named the floating tag (no digest) before tagpin's pin: the revert writes back
    exactly that, and takes out the digest field the pin added."""
    change = edit or (lambda text, pin: manifest.edit_by_marker(text, pin, "web"))
    assert callable(change)
    back = Pin(ImageRef.parse(f"{WEB}:{'v1.3' if 'v1.3' in before else '1.3'}"))
    assert not back.pinned and back.tag_at_digest == back.tag
    pinned = change(before, PIN)
    assert pinned.changed and NEW in pinned.text
    reverted = change(pinned.text, back)
    assert reverted.text == before, (pinned.text, reverted.text)
    assert NEW not in reverted.text
    idempotent(reverted, change(reverted.text, back))


def test_a_revert_to_the_tag_alone_records_the_removed_digest() -> None:
    pinned = kustomize.edit(KUSTOMIZATION, PIN).text
    reverted = kustomize.edit(pinned, BACK)
    assert [(c.path, c.line, c.old, c.new) for c in reverted.changes] == [
        ("images[0].newTag", 10, "1.4", "1.3"),
        ("images[0].digest", 11, NEW, None),
    ]


def test_a_revert_to_the_tag_alone_leaves_a_marked_digest_and_says_so() -> None:
    with pytest.raises(EditError, match=r"line 5: the value marked 'web:digest' has no digest to go back to"):
        manifest.edit_by_marker(MARKED, BACK, "web")
    text = f"images:\n  - name: web\n    newName: {WEB}\n    digest: {OLD}   # a comment goes with it\n"
    assert (
        kustomize.edit(text, BACK).text == f'images:\n  - name: web\n    newName: {WEB}\n    newTag: "1.3"\n'
    )
    inline = f"images:\n  - {{name: web, newName: {WEB}, newTag: '1.3', digest: {OLD}}}\n"
    with pytest.raises(EditError, match="does not start its line"):
        kustomize.edit(inline, BACK)
