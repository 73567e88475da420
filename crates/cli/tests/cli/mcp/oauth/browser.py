"""A scripted browser for tests: plays the user of authorization_server.mjs.

    python3 browser.py AUTH_URL [--user alice] [--password wonderland] [--deny]

GETs AUTH_URL (an authorization request, with a redirect_uri parameter)
keeping cookies, signs in on the login form, allows (or with --deny,
denies) on the consent form, and follows redirects until one leads to the
redirect_uri; that last GET is made too (the program that waits there
completes its login on it). Python's standard library only; proxies from
the environment are ignored.

Prints one line per step to stderr and, at the end, to stdout:

    reached REDIRECT_URI (code, state) -> HTTP 200

(never the code's value). Exits 0 when the redirect_uri was reached with a
code (with --deny: with error=access_denied) and answered below 400, and 1
with a `browser: ...` message otherwise: any page it does not expect, an
authorization error sent back to the redirect_uri, too many steps, an HTTP
error.
"""

import argparse
import html.parser
import http.cookiejar
import sys
import urllib.error
import urllib.parse
import urllib.request

MAX_STEPS = 20


class Fail(Exception):
    pass


def say(message):
    print(f"browser: {message}", file=sys.stderr, flush=True)


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


class Page(html.parser.HTMLParser):
    """The forms of a page (action, method, fields, buttons) and its text."""

    def __init__(self):
        super().__init__()
        self.forms = []
        self.title = ""
        self.text = []
        self._in_title = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "form":
            self.forms.append(
                {"action": attrs.get("action", ""), "method": attrs.get("method", "get").lower(), "fields": {}, "buttons": []}
            )
        elif tag == "input" and self.forms and attrs.get("name"):
            self.forms[-1]["fields"][attrs["name"]] = attrs.get("value", "")
        elif tag == "button" and self.forms:
            self.forms[-1]["buttons"].append((attrs.get("name"), attrs.get("value")))
        elif tag == "title":
            self._in_title = True

    def handle_endtag(self, tag):
        if tag == "title":
            self._in_title = False

    def handle_data(self, data):
        if self._in_title:
            self.title += data
        elif data.strip():
            self.text.append(data.strip())


def same_endpoint(url, redirect_uri):
    a, b = urllib.parse.urlsplit(url), urllib.parse.urlsplit(redirect_uri)
    return (a.scheme, a.hostname, a.port, a.path) == (b.scheme, b.hostname, b.port, b.path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("auth_url")
    parser.add_argument("--user", default="alice")
    parser.add_argument("--password", default="wonderland")
    parser.add_argument("--deny", action="store_true", help="deny on the consent page")
    parser.add_argument("--timeout", type=float, default=30, help="seconds per request (default 30)")
    args = parser.parse_args()

    query = urllib.parse.parse_qs(urllib.parse.urlsplit(args.auth_url).query)
    if "redirect_uri" not in query:
        raise Fail("the authorization URL has no redirect_uri parameter")
    redirect_uri = query["redirect_uri"][0]
    opener = urllib.request.build_opener(
        urllib.request.ProxyHandler({}),
        urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()),
        NoRedirect,
    )

    def fetch(url, data=None):
        request = urllib.request.Request(url, data=data, method="POST" if data is not None else "GET")
        if data is not None:
            request.add_header("Content-Type", "application/x-www-form-urlencoded")
        try:
            response = opener.open(request, timeout=args.timeout)
        except urllib.error.HTTPError as error:
            response = error  # 3xx (redirects are not followed) and 4xx/5xx
        except (urllib.error.URLError, OSError) as error:
            raise Fail(f"{'POST' if data is not None else 'GET'} {url}: {error}") from error
        with response:
            return response.status, response.headers, response.read().decode("utf-8", "replace")

    url, data = args.auth_url, None
    logged_in = consented = False
    for _ in range(MAX_STEPS):
        if same_endpoint(url, redirect_uri):
            params = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)
            got = ", ".join(sorted(params))
            status, _, body = fetch(url)
            print(f"reached {redirect_uri} ({got}) -> HTTP {status}", flush=True)
            if "error" in params:
                error = params["error"][0]
                detail = params.get("error_description", [""])[0]
                if args.deny and error == "access_denied":
                    return 0 if status < 400 else fail_status(status, body)
                raise Fail(f"the authorization server sent back error={error}: {detail}")
            if args.deny:
                raise Fail("consent was denied but the redirect carries no error=access_denied")
            if "code" not in params:
                raise Fail("the redirect to the redirect_uri carries neither code nor error")
            return 0 if status < 400 else fail_status(status, body)

        status, headers, body = fetch(url, data)
        say(f"{'POST' if data is not None else 'GET'} {urllib.parse.urlsplit(url).path} -> {status}")
        data = None
        if status in (301, 302, 303, 307, 308):
            location = headers.get("Location")
            if not location:
                raise Fail(f"redirect {status} without Location from {url}")
            url = urllib.parse.urljoin(url, location)
            continue
        if status != 200 or "html" not in (headers.get("Content-Type") or ""):
            raise Fail(f"unexpected answer {status} from {url}: {body[:500]}")

        page = Page()
        page.feed(body)
        login = next((f for f in page.forms if "password" in f["fields"]), None)
        if login is not None:
            if logged_in:
                raise Fail(f"the login form again, sign-in failed: {' '.join(page.text)[:300]}")
            logged_in = True
            fields = dict(login["fields"], login=args.user, password=args.password)
            url, data = urllib.parse.urljoin(url, login["action"]), urllib.parse.urlencode(fields).encode()
            say(f"signing in as {args.user}")
            continue
        choice = "deny" if args.deny else "allow"
        consent = next((f for f in page.forms if ("decision", choice) in f["buttons"]), None)
        if consent is not None and page.title.strip() == "Authorize":
            if consented:
                raise Fail("the consent form again")
            consented = True
            fields = dict(consent["fields"], decision=choice)
            url, data = urllib.parse.urljoin(url, consent["action"]), urllib.parse.urlencode(fields).encode()
            say(f"consent: {choice} ({' '.join(page.text)[:200]})")
            continue
        raise Fail(f"unexpected page {page.title.strip()!r} at {url}: {' '.join(page.text)[:300]}")
    raise Fail(f"no redirect to {redirect_uri} after {MAX_STEPS} steps")


def fail_status(status, body):
    raise Fail(f"the redirect_uri answered HTTP {status}: {body[:300]}")


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Fail as failure:
        print(f"browser: {failure}", file=sys.stderr, flush=True)
        sys.exit(1)
