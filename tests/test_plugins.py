"""Third-party backends through the ``trustjudge.backends`` entry point group.

Plugin packages are written by the tests into tmp_path and made visible on a temporary ``sys.path``
entry, the way an installed package is: a ``.dist-info`` folder whose ``entry_points.txt`` names the
factory (written by hand, or by pip from the package's pyproject.toml). Nothing is installed into the
environment; the fixture removes the path entry and the plugin modules afterwards and checks that the
plugins are gone.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from trustjudge import Item, Judge, items_from_dicts
from trustjudge.backends import PLUGIN_GROUP, MockBackend, backend_plugins, get_backend
from trustjudge.errors import ConfigError

from .conftest import install_dist

PLUGIN_MODULE = '''
from trustjudge.backends import Backend, MockBackend


def seven(request):
    """All the probability the scale's labels get goes to 7."""
    return [0.9 if label.rstrip("]") == "7" else 1e-6 for label in request.labels]


def build(rest):
    return MockBackend(f"plugin-{rest}", script=seven, keep_history=False)


def raising(rest):
    raise RuntimeError(f"no model called {rest}")


def not_backend(rest):
    return "a string"


NOT_CALLABLE = 42
'''

BROKEN_MODULE = "import trustjudge_no_such_module_xyz  # noqa\n\ndef build(rest):\n    return None\n"


def write_dist(site: Path, dist: str, entry_points: dict[str, str]) -> None:
    """A minimal installed backend distribution (:func:`tests.conftest.install_dist`)."""
    install_dist(site, dist, PLUGIN_GROUP, entry_points)


@pytest.fixture
def plugin_site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A sys.path folder holding the plugin distributions; removed (with their modules) afterwards."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "tj_plugin_mod.py").write_text(PLUGIN_MODULE)
    (site / "tj_broken_mod.py").write_text(BROKEN_MODULE)
    write_dist(site, "tj-good-plugin", {"myplug": "tj_plugin_mod:build"})
    write_dist(site, "tj-bad-plugins", {
        "brokenimport": "tj_broken_mod:build", "raising": "tj_plugin_mod:raising",
        "notbackend": "tj_plugin_mod:not_backend", "notcallable": "tj_plugin_mod:NOT_CALLABLE",
        "mock": "tj_plugin_mod:raising",  # a built-in's prefix: never used
        "dup": "tj_plugin_mod:build",
    })
    write_dist(site, "tj-other-plugin", {"dup": "tj_plugin_mod:raising"})
    monkeypatch.delenv("TRUSTJUDGE_BACKEND_PLUGINS", raising=False)
    with monkeypatch.context() as m:
        m.syspath_prepend(str(site))  # also invalidates the import caches
        yield site
    for name in ("tj_plugin_mod", "tj_broken_mod"):
        sys.modules.pop(name, None)
    importlib.invalidate_caches()
    assert not {"myplug", "raising", "dup"} & set(backend_plugins()), "the test's plugins are still visible"


def small_items() -> list[Item]:
    return items_from_dicts([{"id": "q1", "question": "What is 2 + 2?",
                              "responses": [{"id": "a", "text": "4"}, {"id": "b", "text": "5"}]}])


def test_a_plugin_backend_judges_by_name(plugin_site: Path, tmp_path: Path) -> None:
    judge = Judge("myplug/x", store=tmp_path / "s.sqlite")
    try:
        records = list(judge.score(small_items()))
        assert [r.judge for r in records] == ["myplug/x", "myplug/x"]
        assert [r.scores["discrete"] for r in records] == [7.0, 7.0]
        assert judge.backend.fingerprint == "mock:plugin-x"  # the factory got the model part of the name
        assert judge.stats.model_calls == 2
    finally:
        judge.close()


def test_broken_plugins_name_themselves(plugin_site: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"judge 'brokenimport/x': backend plugin 'brokenimport' "
                                          r"\(tj_broken_mod:build from tj-bad-plugins 1\.0\) cannot be loaded: "
                                          r"ModuleNotFoundError: No module named 'trustjudge_no_such_module_xyz'"):
        get_backend("brokenimport/x")
    with pytest.raises(ConfigError, match=r"backend plugin 'raising' \(tj_plugin_mod:raising from tj-bad-plugins "
                                          r"1\.0\) failed to build the backend for 'm1': RuntimeError: no model "
                                          r"called m1") as info:
        get_backend("raising/m1")
    assert isinstance(info.value.__cause__, RuntimeError)
    with pytest.raises(ConfigError, match=r"backend plugin 'notbackend' \(tj_plugin_mod:not_backend .*\) returned a "
                                          r"str, not a trustjudge.backends.Backend"):
        get_backend("notbackend/x")
    with pytest.raises(ConfigError, match=r"backend plugin 'notcallable' \(tj_plugin_mod:NOT_CALLABLE .*\) is a int, "
                                          r"not a callable"):
        get_backend("notcallable/x")
    with pytest.raises(ConfigError, match=r"2 backend plugins claim the prefix 'dup': backend plugin 'dup' "
                                          r"\(tj_plugin_mod:build from tj-bad-plugins 1.0\); backend plugin 'dup' "
                                          r"\(tj_plugin_mod:raising from tj-other-plugin 1.0\)"):
        get_backend("dup/x")
    # A broken plugin breaks only its own names: built-ins, the other plugins and Judge keep working.
    assert isinstance(get_backend("myplug/y"), MockBackend)
    hashed = get_backend("mock/hash")  # a plugin named like a built-in is never asked
    assert hashed.fingerprint == "mock:hash"
    judge = Judge("raising/x", store=tmp_path / "s.sqlite")
    try:
        with pytest.raises(ConfigError, match="backend plugin 'raising'"):
            list(judge.score(small_items()))
    finally:
        judge.close()


def test_unknown_prefixes_list_the_plugins(plugin_site: Path) -> None:
    with pytest.raises(ConfigError, match=r"unknown judge 'nope/x': judge names start with one of .*"
                                          r"hf/\.\.\., .*myplug/\.\.\.") as info:
        get_backend("nope/x")
    assert "mock/..., mock/..." not in str(info.value)  # the shadowing plugin is not listed twice
    with pytest.raises(ConfigError, match="unknown judge 'myplug'"):
        get_backend("myplug")  # no model part


def test_the_plugin_set_can_be_pinned(plugin_site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRUSTJUDGE_BACKEND_PLUGINS", "raising, notbackend")
    assert set(backend_plugins()) == {"raising", "notbackend"}
    with pytest.raises(ConfigError, match="unknown judge 'myplug/x'"):
        get_backend("myplug/x")
    monkeypatch.setenv("TRUSTJUDGE_BACKEND_PLUGINS", "")
    assert backend_plugins() == {}
    assert get_backend("mock/hash").fingerprint == "mock:hash"


def test_a_plugin_package_built_by_pip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same plugin as a real package: its pyproject.toml declares the entry point, pip builds it into
    a private folder (``--target``), never into the test environment."""
    pytest.importorskip("setuptools", reason="pip --no-build-isolation builds with the environment's setuptools")
    pkg = tmp_path / "pkg"
    (pkg / "tj_pip_plugin").mkdir(parents=True)
    (pkg / "tj_pip_plugin" / "__init__.py").write_text(PLUGIN_MODULE)
    (pkg / "pyproject.toml").write_text(f'''
[build-system]
requires = ["setuptools"]
build-backend = "setuptools.build_meta"

[project]
name = "tj-pip-plugin"
version = "0.1"

[project.entry-points."{PLUGIN_GROUP}"]
pipplug = "tj_pip_plugin:build"
''')
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                    "--no-index", "--disable-pip-version-check", "--target", str(site), str(pkg)],
                   check=True, timeout=300, cwd=tmp_path)
    try:
        with monkeypatch.context() as m:
            m.syspath_prepend(str(site))
            judge = Judge("pipplug/z", store=tmp_path / "s.sqlite")
            try:
                assert [r.scores["discrete"] for r in judge.score(small_items())] == [7.0, 7.0]
                assert judge.backend.fingerprint == "mock:plugin-z"
            finally:
                judge.close()
    finally:
        sys.modules.pop("tj_pip_plugin", None)
        importlib.invalidate_caches()
    assert "pipplug" not in backend_plugins()
