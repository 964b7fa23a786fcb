"""The console in a real browser (Debian's headless chromium, driven by Selenium through Debian's
chromium-driver) against the local stack: one stack and one browser for the module.

Without the token every page is 401; signing in with the token `tagpin local` prints shows the
followed image and its target; a pending approval is approved with one click and the workload rolls;
Hold keeps the target where it is while the tag moves, Release
applies the tag's new digest and the workload rolls; hostile text from a registry's error, a
target's history and the dead letters is shown as text and runs nothing; a POST without the CSRF
token, or with another session's, is refused (403). Screenshots go to docs/images/ (docs/console.md).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from tagpin.domain.messages import Trigger
from tagpin.ports.state import TargetNote, TargetStatus
from tagpin_cli import commands
from tagpin_local.kube.manifests import deployment
from tagpin_local.oci import push_image
from tagpin_local.stack import LocalStack, StackOptions

from tests.conftest import require_binary
from tests.support.constants import ROOT
from tests.support.stack import drain, state_of
from tests.support.waiting import wait_for

pytestmark = pytest.mark.e2e

IMAGES = ROOT / "docs" / "images"
TARGET = "local/default/Deployment/web/web"
HOSTILE = "<script>alert(1)</script><img src=x onerror=alert(2)>"
DEADLINE_S = 45.0
PAGES = ["/console", "/console/images", "/console/targets", "/console/holds", "/console/dead-letters",
         "/console/target?id=" + TARGET, "/console/static/nothing.css", "/console/anything"]  # fmt: skip


def wait_for_page(what: str, condition: Callable[[], Any], step: Callable[[], Any] | None = None) -> Any:
    """``wait_for`` on a page: one that navigates while it is read (a form's redirect: a stale
    element, a node no longer in the document, no element yet) is "not yet"."""
    from selenium.common.exceptions import WebDriverException

    return wait_for(what, condition, DEADLINE_S, step=step, every_s=0.3, not_yet=(WebDriverException,))


@pytest.fixture(scope="module")
def st() -> Iterator[LocalStack]:
    require_binary("docker-registry", "/usr/bin/docker-registry")
    options = StackOptions(notifications=False, poll_interval=None, consume=False)
    with LocalStack(options) as stack:
        assert stack.registry is not None
        image = f"{stack.registry.host}/demo/web:stable"
        stack.kube.create(deployment("web", "default", image, container="web"))
        gated = f"{stack.registry.host}/demo/gated:stable"  # every digest waits for a person
        stack.kube.create(deployment("gated", "default", gated, container="gated"))
        stack.options.images = [
            {
                "image": gated,
                "approval": True,
                "targets": [
                    {"cluster": "local", "namespace": "default", "name": "gated", "container": "gated"}
                ],
            }
        ]
        stack.write_config()
        yield stack


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless chromium for the module (Selenium; the driver Debian ships, never a download)."""
    chromium = require_binary("chromium", "/usr/bin/chromium")
    driver_path = require_binary("chromedriver", "/usr/bin/chromedriver")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,900",
                     "--disable-gpu", "--no-first-run", "--password-store=basic"):  # fmt: skip
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def shot(driver: Any, name: str) -> None:
    IMAGES.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(IMAGES / f"console-{name}.png"))


def text(driver: Any) -> str:
    """The page's visible text, read in one script call (no element reference to go stale)."""
    return str(driver.execute_script("return document.body ? document.body.innerText : ''"))


def no_alert(driver: Any) -> None:
    from selenium.common.exceptions import NoAlertPresentException

    with pytest.raises(NoAlertPresentException):
        driver.switch_to.alert  # noqa: B018 (an alert would be there)


def sign_in(driver: Any, st: LocalStack, token: str | None = None) -> None:
    driver.delete_all_cookies()
    driver.get(st.console_url + "/signin")
    driver.find_element("id", "token").send_keys(token or st.console_token)
    driver.find_element("id", "signin").click()
    wait_for_page("the overview", lambda: "Overview" in driver.title)


def target_row(driver: Any) -> Any:
    return driver.find_element("css selector", f'tr[data-target="{TARGET}"]')


def deployed_image(st: LocalStack) -> str:
    return str(
        st.kube.get("Deployment", "default", "web")["spec"]["template"]["spec"]["containers"][0]["image"]
    )


def roll(st: LocalStack) -> str:
    """A new image under the tag, seen by a poll; the changes it enqueues applied."""
    assert st.registry is not None
    digest = push_image(st.registry.url, "demo/web", "stable")
    st.run_poller()
    drain(st)
    return digest


@pytest.fixture(scope="module")
def rolled(st: LocalStack) -> str:
    """The tag's first digest, applied: the target exists in tagpin's state."""
    digest = roll(st)
    wait_for_page("the workload at the tag's digest", lambda: digest in deployed_image(st))
    return digest


@pytest.fixture
def unheld(st: LocalStack, rolled: str) -> None:
    """The target not held, at the tag's digest: a test that held it, or released it, and failed
    before it was current again leaves nothing behind for the next (pytest-randomly shuffles)."""
    stored = state_of(st).targets.get(TARGET)
    if stored is not None and stored.status is TargetStatus.HELD:
        commands.release(TARGET)
    wait_for_page(
        "the target released and current",
        lambda: (
            (t := state_of(st).targets.get(TARGET)) is not None
            and t.status in (TargetStatus.APPLIED, TargetStatus.VERIFIED)
        ),
        lambda: drain(st),
    )


@pytest.fixture
def signed_in(st: LocalStack, browser: Any, unheld: None) -> Any:
    """The browser signed in (each test stands alone: pytest-randomly shuffles their order)."""
    if browser.get_cookie("tagpin_session") is None:
        sign_in(browser, st)
    return browser


# -- the tests, in the order a person goes (each stands alone) --------------------------------------
def test_without_the_token_every_page_is_401(st: LocalStack, browser: Any) -> None:
    browser.delete_all_cookies()
    for page in PAGES:
        response = httpx.get(st.console_url.removesuffix("/console") + page, timeout=10)
        assert response.status_code == 401, page
        assert "tagpin/demo" not in response.text and "demo/web" not in response.text
    browser.get(st.console_url + "/targets")
    assert "401 Unauthorized" in text(browser) and "demo/web" not in text(browser)
    browser.find_element("id", "signin-link").click()
    wait_for_page("the sign-in page", lambda: browser.find_elements("id", "token"))
    browser.find_element("id", "token").send_keys("not the token")
    browser.find_element("id", "signin").click()
    wait_for_page("the refusal", lambda: browser.find_elements("id", "signin-error"))
    assert browser.get_cookie("tagpin_session") is None
    shot(browser, "signin")


def test_signing_in_shows_the_followed_image_and_its_target(
    st: LocalStack, browser: Any, unheld: None
) -> None:
    digest = deployed_image(st).rsplit("@", 1)[1]
    sign_in(browser, st)
    cookie = browser.get_cookie("tagpin_session")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == "/console"
    assert st.console_token not in browser.page_source
    assert "demo/web:stable" in text(browser) and "Pending approvals" in text(browser)
    shot(browser, "overview")
    browser.find_element("link text", "Targets").click()
    wait_for_page("the targets", lambda: "Targets" in browser.title)
    row = target_row(browser)
    assert "current" in row.text and digest[7:19] in row.text
    shot(browser, "targets")


def test_hold_keeps_it_release_rolls_it(st: LocalStack, signed_in: Any) -> None:
    browser = signed_in
    browser.get(st.console_url + "/targets")
    target_row(browser).find_element("css selector", 'button[data-action="hold"]').click()
    wait_for_page("the held target", lambda: "Held: tagpin leaves" in text(browser))
    row = target_row(browser)
    assert "held" in row.text and "held by local" in row.text
    before = deployed_image(st)
    moved = roll(st)  # the tag moves: the held target stays
    time.sleep(1)
    drain(st)
    assert deployed_image(st) == before and moved not in before
    browser.refresh()
    assert "held" in target_row(browser).text
    shot(browser, "held")
    browser.find_element("link text", "Holds").click()
    wait_for_page("the holds page", lambda: "Holds" in browser.title)
    assert TARGET in text(browser)
    browser.get(st.console_url + "/target?id=" + TARGET)
    target_row(browser).find_element("css selector", 'button[data-action="release"]').click()
    wait_for_page("the release", lambda: "Released: the tag" in text(browser))
    wait_for_page("the workload at the new digest", lambda: moved in deployed_image(st), lambda: drain(st))

    def current() -> bool:
        browser.refresh()
        return "current" in target_row(browser).text

    wait_for_page("the target current again", current, lambda: drain(st))
    assert "released by local" in text(browser)
    shot(browser, "released")


def test_a_pending_approval_is_approved_with_one_click_and_the_workload_rolls(
    st: LocalStack, signed_in: Any
) -> None:
    browser = signed_in
    assert st.registry is not None
    gated = f"{st.registry.host}/demo/gated:stable"
    before = gated_image(st)
    digest = push_image(st.registry.url, "demo/gated", "stable")
    st.run_poller()
    drain(st)
    browser.get(st.console_url)
    row = wait_for_page(
        "the pending approval",
        lambda: browser.find_elements("css selector", f'tr[data-approval="{gated}"]'),
        lambda: browser.refresh(),
    )[0]
    assert digest[:19] in row.text and gated_image(st) == before  # waits: nothing rolled
    shot(browser, "approval")
    row.find_element("css selector", 'button[data-action="approve"]').click()
    wait_for_page("the decision", lambda: "Approved: the wave starts" in text(browser))
    wait_for_page("the workload at the approved digest", lambda: digest in gated_image(st), lambda: drain(st))
    assert not browser.find_elements("css selector", f'tr[data-approval="{gated}"]')
    history = state_of(st).history.of_image(gated)
    assert [e.detail for e in history if e.event == "approved"] == ["wave all: approved by local via console"]


def gated_image(st: LocalStack) -> str:
    return str(
        st.kube.get("Deployment", "default", "gated")["spec"]["template"]["spec"]["containers"][0]["image"]
    )


def test_hostile_text_is_shown_as_text_and_runs_nothing(st: LocalStack, signed_in: Any) -> None:
    browser = signed_in
    assert st.registry is not None
    image = f"{st.registry.host}/demo/web:stable"
    state = state_of(st)
    now = int(time.time() * 1000)
    state.tags.record_error(image, f"registry said: {HOSTILE}", now)  # a registry's error message
    stored = state.targets.get(TARGET)
    assert stored is not None
    state.targets.note(TARGET, stored.digest, TargetNote.DEFERRED, now, f"annotation {HOSTILE}", Trigger.POLL)
    st.client("sqs").send_message(  # a dead letter no one can read
        QueueUrl=st.dlq_url,
        MessageBody=f"notification {HOSTILE}",
        MessageGroupId="junk",
        MessageDeduplicationId="x",
    )
    browser.get(st.console_url + "/target?id=" + TARGET)
    no_alert(browser)
    assert f"annotation {HOSTILE}" in text(browser)
    assert not browser.find_elements("css selector", 'img[src="x"]')
    assert browser.execute_script("return document.querySelectorAll('main script').length") == 0
    browser.get(st.console_url + "/images")
    no_alert(browser)
    assert f"registry said: {HOSTILE}" in text(browser)
    assert not browser.find_elements("css selector", 'img[src="x"]')
    shot(browser, "hostile-text")
    browser.get(st.console_url + "/dead-letters")
    no_alert(browser)
    assert f"notification {HOSTILE}" in text(browser)
    assert not browser.find_elements("css selector", 'img[src="x"]')
    shot(browser, "dead-letters")
    browser.find_element("css selector", 'button[data-action="redrive"]').click()
    wait_for_page("the redrive", lambda: "Messages sent back" in text(browser))
    no_alert(browser)


def test_a_post_without_the_csrf_token_or_with_anothers_is_403(st: LocalStack, signed_in: Any) -> None:
    browser = signed_in
    # another session: signed in apart, its CSRF token read from its own page
    other = httpx.Client(base_url=st.console_url.removesuffix("/console"), timeout=10)
    assert other.post("/console/signin", data={"token": st.console_token}).status_code == 303
    theirs = re.search(r'name="csrf" value="([0-9a-f]+)"', other.get("/console/targets").text)
    assert theirs is not None
    browser.get(st.console_url + "/targets")
    held_before = "held" in target_row(browser).text
    hold = 'button[data-action="hold"]'
    browser.execute_script(
        "document.querySelector(arguments[0]).form.querySelector('input[name=csrf]').remove()", hold
    )
    target_row(browser).find_element("css selector", hold).click()
    wait_for_page("the refusal", lambda: "403 Forbidden" in text(browser))
    browser.get(st.console_url + "/targets")
    browser.execute_script(
        "document.querySelector(arguments[0]).form.querySelector('input[name=csrf]').value = arguments[1]",
        hold,
        theirs.group(1),
    )
    target_row(browser).find_element("css selector", hold).click()
    wait_for_page("the refusal", lambda: "403 Forbidden" in text(browser))
    shot(browser, "csrf-403")
    browser.get(st.console_url + "/targets")
    assert ("held" in target_row(browser).text) == held_before  # nothing was done
    # the same from outside the browser: the session's cookie without its token
    session = browser.get_cookie("tagpin_session")["value"]
    response = httpx.post(
        st.console_url + "/actions/hold",
        data={"target": TARGET, "csrf": theirs.group(1)},
        cookies={"tagpin_session": session},
        timeout=10,
    )
    assert response.status_code == 403
    other.close()


def test_security_headers_on_every_answer(st: LocalStack, signed_in: Any) -> None:
    browser = signed_in
    session = browser.get_cookie("tagpin_session")["value"]
    for page in ("/console", "/console/signin", "/console/nothing"):
        response = httpx.get(
            st.console_url.removesuffix("/console") + page, cookies={"tagpin_session": session}, timeout=10
        )
        csp = response.headers["content-security-policy"]
        assert "default-src 'none'" in csp and "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["referrer-policy"] == "no-referrer"
    logs = browser.get_log("browser") if hasattr(browser, "get_log") else []
    assert not [entry for entry in logs if "Content Security Policy" in entry.get("message", "")], logs


def test_signing_out_ends_the_session_for_a_copy_of_its_cookie(st: LocalStack, browser: Any) -> None:
    """A person clicks Sign out: the browser forgets the cookie, and the server refuses a copy of it
    (taken before, as someone reading the browser's storage would) and its forms."""
    sign_in(browser, st)
    browser.get(st.console_url + "/targets")
    copied = browser.get_cookie("tagpin_session")["value"]
    csrf = browser.find_element("css selector", 'input[name="csrf"]').get_attribute("value")
    browser.find_element("css selector", 'form[action="/console/signout"] button').click()
    wait_for_page("the sign-in page", lambda: browser.title.startswith("Sign in"))
    assert browser.get_cookie("tagpin_session") is None
    cookie = {"cookie": f"tagpin_session={copied}"}
    assert httpx.get(st.console_url + "/targets", headers=cookie, timeout=10).status_code == 401
    form = {"target": TARGET, "csrf": csrf}
    assert (
        httpx.post(st.console_url + "/actions/hold", data=form, headers=cookie, timeout=10).status_code == 401
    )
    browser.get(st.console_url)
    assert "Sign in first" in text(browser)
