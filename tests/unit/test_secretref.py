"""fleet.secretref.without_userinfo: a URL's password never in what fleet says."""

from __future__ import annotations

import pytest

from fleet.secretref import without_userinfo


@pytest.mark.parametrize(("text", "shown"), [
    ("https://ci:s3cr3t@pypi.example/simple", "https://ci:***@pypi.example/simple"),
    ("from https://__token__:pypi-AgEI@upload.example/legacy/ into /tmp/x@y",
     "from https://__token__:***@upload.example/legacy/ into /tmp/x@y"),
    ("https://tok3n@gitlab.example/api/v4/simple", "https://***@gitlab.example/api/v4/simple"),  # a lone token
    ("https://u:p@ss@host/simple", "https://u:***@host/simple"),  # an '@' left unencoded in the password
    ("https://u:pa/ss@host/simple", "https://u:***@host/simple"),  # a '/' too
    ("'https://u:p@host/s' and (http://a:b@c/d)", "'https://u:***@host/s' and (http://a:***@c/d)"),
    ("https://pypi.org/simple and file:///tmp/simple", "https://pypi.org/simple and file:///tmp/simple"),
])
def test_a_urls_userinfo_is_masked_wherever_it_stands(text, shown):
    assert without_userinfo(text) == shown
