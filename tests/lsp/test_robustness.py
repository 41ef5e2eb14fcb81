"""Bad input never stops the server: broken settings and pyproject, odd text,
huge files; plus run modes, enable, logging and the entry point."""

from __future__ import annotations

import asyncio
import pytest
from lsprotocol import types as lsp

from lsp_harness import (
    FAST,
    GRU_LINE,
    GRU_SEED,
    REGRESSION_SEED,
    change_full,
    codes,
    file_uri,
    hover,
    open_doc,
    use,
    wait_for_diagnostics,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def _wait_message(client, predicate, timeout=10.0):
    for _ in range(int(timeout / 0.05)):
        hits = [m for m in client.messages if predicate(m)]
        if hits:
            return hits
        await asyncio.sleep(0.05)
    pytest.fail(f"no matching window/showMessage; got {[m.message for m in client.messages]}")


async def test_invalid_settings_are_reported_and_defaulted(session, tmp_path):
    bad = {"run": "sometimes", "debounce": -5, "select": ["XYZ"], "severity": {"GG101": "loud"}, "enable": "yes", "logLevel": 3}
    uri = file_uri(tmp_path, "a.py")
    async with session(init_options=bad) as client:
        msgs = await _wait_message(client, lambda m: m.type == lsp.MessageType.Error)
        text = " ".join(m.message for m in client.messages)
        for key in ("run", "debounce", "select", "severity", "enable", "logLevel"):
            assert key in text, (key, text)
        open_doc(client, uri, GRU_SEED, 1)
        assert codes(await wait_for_diagnostics(client, uri, 1)) == ["GG101"]  # defaults: every rule, error
        assert msgs


async def test_pyproject_config_is_merged_and_a_broken_one_reported(session, tmp_path):
    good = tmp_path / "good"
    good.mkdir()
    (good / "pyproject.toml").write_text('[tool.gradguard]\nignore = ["GG101"]\n[tool.gradguard.severity]\nGG102 = "warning"\n', encoding="utf-8")
    (good / "sub").mkdir()
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "pyproject.toml").write_text("[tool.gradguard]\nselect = 5\n", encoding="utf-8")
    both = GRU_SEED + "\n" + REGRESSION_SEED.replace("import torch\nfrom torch import nn\n", "")
    async with session(init_options=FAST, root=tmp_path) as client:
        u1 = (good / "sub" / "train.py").as_uri()
        open_doc(client, u1, both, 1)
        pub = await wait_for_diagnostics(client, u1, 1)
        assert codes(pub) == ["GG102"] and pub.diagnostics[0].severity == lsp.DiagnosticSeverity.Warning

        u2 = (broken / "train.py").as_uri()
        open_doc(client, u2, both, 1)
        assert codes(await wait_for_diagnostics(client, u2, 1)) == ["GG101", "GG102"]  # defaults
        msgs = await _wait_message(client, lambda m: m.type == lsp.MessageType.Error and "pyproject.toml" in m.message)
        assert "select" in msgs[0].message

        # editor settings on top of the project's: severity wins, select narrows
        mark = len(client.published)
        client.workspace_did_change_configuration(
            lsp.DidChangeConfigurationParams(settings={"gradguard": {"debounce": 20, "select": ["GG101"], "severity": {"GG101": "hint"}}})
        )
        pub = await wait_for_diagnostics(client, u2, 1, since=mark)
        assert codes(pub) == ["GG101"] and pub.diagnostics[0].severity == lsp.DiagnosticSeverity.Hint


async def test_settings_per_workspace_folder(session, tmp_path):
    """Resource-scoped settings: workspace/configuration is asked per folder."""
    a, b = tmp_path / "proj_a", tmp_path / "项目 b"
    a.mkdir()
    b.mkdir()
    config = {"debounce": 20}
    async with session(init_options=FAST, root=a, folders=[a, b], configuration=config) as client:
        client.set_configuration({"debounce": 20, "ignore": ["GG101"]}, section="gradguard", scope_uri=b.as_uri())
        mark = len(client.published)
        client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(settings=None))
        ua, ub = (a / "t.py").as_uri(), (b / "t.py").as_uri()
        await asyncio.sleep(0.2)
        open_doc(client, ua, GRU_SEED, 1)
        open_doc(client, ub, GRU_SEED, 1)
        assert codes(await wait_for_diagnostics(client, ua, 1, since=mark)) == ["GG101"]
        assert codes(await wait_for_diagnostics(client, ub, 1, since=mark)) == []

        client.set_configuration({"debounce": 20, "severity": {"GG101": "warning"}}, section="gradguard", scope_uri=b.as_uri())
        mark = len(client.published)
        client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(settings=None))
        pb = await wait_for_diagnostics(client, ub, 1, since=mark)
        assert codes(pb) == ["GG101"] and pb.diagnostics[0].severity == lsp.DiagnosticSeverity.Warning
        pa = await wait_for_diagnostics(client, ua, 1, since=mark)
        assert pa.diagnostics[0].severity == lsp.DiagnosticSeverity.Error


async def test_odd_text_and_huge_files_keep_the_server_serving(shared, tmp_path):
    async with use(shared) as client:
        nul = file_uri(tmp_path, "nul.py")
        open_doc(client, nul, "x = 1\x00\ny = '\udcff'\n" + GRU_SEED, 1)
        await wait_for_diagnostics(client, nul, 1)

        binary = file_uri(tmp_path, "blob.py")
        open_doc(client, binary, "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\xff\xfe" * 50, 1)
        await wait_for_diagnostics(client, binary, 1)

        crlf = file_uri(tmp_path, "crlf.py")
        open_doc(client, crlf, GRU_SEED.replace("\n", "\r\n"), 1)
        pub = await wait_for_diagnostics(client, crlf, 1)
        assert codes(pub) == ["GG101"] and pub.diagnostics[0].range.start.line == GRU_LINE

        huge = file_uri(tmp_path, "huge.py")
        open_doc(client, huge, "x = 1\n" * 30_000, 1)  # beyond the analysis limit: not analysed
        pub = await wait_for_diagnostics(client, huge, 1, timeout=60)
        assert list(pub.diagnostics) == []
        assert any("not analysed" in m.message and "huge.py" in m.message for m in client.log_messages)

        # a long file whose analysis takes a while must not hold up the others
        big = file_uri(tmp_path, "big.py")
        body = "".join(f"v{i} = torch.zeros({i % 7 + 1})  # 第{i}行\n" for i in range(4_000))
        mark = len(client.published)
        open_doc(client, big, GRU_SEED + body, 1)
        small = file_uri(tmp_path, "small.py")
        open_doc(client, small, GRU_SEED, 1)
        assert codes(await wait_for_diagnostics(client, small, 1, since=mark, timeout=30)) == ["GG101"]
        h = await hover(client, small, GRU_LINE, 10)
        assert h is not None and "GG101" in h.contents.value
        assert codes(await wait_for_diagnostics(client, big, 1, since=mark, timeout=90)) == ["GG101"]
        order = [p.uri for p in client.published[mark:] if p.uri in (big, small)]
        assert order.index(small) < order.index(big), "the small file waited for the big one"
        mark = len(client.published)
        client.text_document_did_close(lsp.DidCloseTextDocumentParams(text_document=lsp.TextDocumentIdentifier(big)))
        assert list((await wait_for_diagnostics(client, big, since=mark)).diagnostics) == []


async def test_paths_with_spaces_non_ascii_and_lone_surrogates(shared, tmp_path):
    folder = tmp_path / "我的 项目 (v2)"
    folder.mkdir()
    uri = (folder / "train file #1.py").as_uri()  # percent-encoded by the client
    assert "%20" in uri
    lines = GRU_SEED.split("\n")
    lines[GRU_LINE] = '    s = "\udcff"; out, hidden = gru(x, hidden)'
    text = "\n".join(lines)
    async with use(shared) as client:
        open_doc(client, uri, text, 1)
        pub = await wait_for_diagnostics(client, uri, 1)
        assert codes(pub) == ["GG101"]
        d = pub.diagnostics[0]
        assert d.range.start.character == lines[GRU_LINE].index("out")  # the lone surrogate is one unit
        h = await hover(client, uri, GRU_LINE, d.range.start.character + 1)
        assert h is not None and "GG101" in h.contents.value
        from lsp_harness import apply_workspace_edit, code_actions

        actions = await code_actions(client, uri, d.range, [d], only=["source.fixAll"])
        assert len(actions) == 1
        fixed = apply_workspace_edit(text, uri, actions[0].edit, expect_version=1)
        change_full(client, uri, fixed, 2)
        assert list((await wait_for_diagnostics(client, uri, 2)).diagnostics) == []


HELPER_KEEPS = '''def keep(h):
    """Looks harmless, but keeps the graph."""
    return h * 1.0
'''
HELPER_DETACHES = '''def keep(h):
    """Cuts the graph."""
    return h.detach()
'''
TRAIN_WITH_IMPORT = """\
import torch
from torch import nn
from helpers import keep

gru = nn.GRU(4, 6)
opt = torch.optim.SGD(gru.parameters(), lr=0.1)
hidden = torch.zeros(1, 3, 6)
for step in range(4):
    hidden = keep(hidden)
    out, hidden = gru(torch.randn(5, 3, 4), hidden)
    loss = out.sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


async def test_names_imported_from_the_users_other_files_are_resolved(shared, tmp_path):
    """What `keep` does is only known from helpers.py: the server looks it up after
    the first publish and publishes again; an edit to helpers.py is picked up."""
    (tmp_path / "helpers.py").write_text(HELPER_KEEPS, encoding="utf-8")
    uri = file_uri(tmp_path, "train.py")
    async with use(shared) as client:
        open_doc(client, uri, TRAIN_WITH_IMPORT, 1)
        pub = await wait_for_diagnostics(client, uri, 1, check=lambda p: codes(p) == ["GG101"])
        assert pub.diagnostics[0].range.start.line == 9

        (tmp_path / "helpers.py").write_text(HELPER_DETACHES, encoding="utf-8")
        change_full(client, uri, TRAIN_WITH_IMPORT + "# 改了一行\n", 2)
        await wait_for_diagnostics(client, uri, 2, check=lambda p: codes(p) == [])


async def test_a_model_imported_from_another_file_that_keeps_its_state(shared, tmp_path):
    """The model's forward keeps the LSTM state on the module, and the class is
    in seq_model.py: the server learns it by resolving the import, reports the
    loop's call of the model, and its quick fix (in this file) clears it."""
    from pathlib import Path

    from lsp_harness import apply_workspace_edit, code_actions

    project = Path(__file__).resolve().parent.parent / "fixtures" / "projects" / "stateful_lstm"
    (tmp_path / "seq_model.py").write_text((project / "seq_model.py").read_text(encoding="utf-8"), encoding="utf-8")
    text = (project / "gg101_state_kept_on_the_module.py").read_text(encoding="utf-8")
    call_line = next(i for i, ln in enumerate(text.split("\n")) if "outputs = net(x)" in ln)
    uri = file_uri(tmp_path, "train.py")
    async with use(shared) as client:
        open_doc(client, uri, text, 1)
        pub = await wait_for_diagnostics(client, uri, 1, check=lambda p: codes(p) == ["GG101"])
        d = pub.diagnostics[0]
        assert d.range.start.line == call_line and "net.hidden" in d.message
        actions = await code_actions(client, uri, d.range, [d])
        preferred = next(a for a in actions if a.is_preferred)
        fixed = apply_workspace_edit(text, uri, preferred.edit, expect_version=1)
        assert "net.hidden = tuple(" in fixed
        change_full(client, uri, fixed, 2)
        await wait_for_diagnostics(client, uri, 2, check=lambda p: codes(p) == [])


async def test_enable_false_and_on_save_mode(session, tmp_path):
    uri = file_uri(tmp_path, "m.py")
    async with session(init_options={"debounce": 20, "run": "onSave", "logLevel": "error"}) as client:
        open_doc(client, uri, "import torch\n", 1)
        assert list((await wait_for_diagnostics(client, uri, 1)).diagnostics) == []
        mark = len(client.published)
        change_full(client, uri, GRU_SEED, 2)
        await asyncio.sleep(0.4)
        assert not [p for p in client.published[mark:] if p.uri == uri], "onSave: typing publishes nothing"
        client.text_document_did_save(lsp.DidSaveTextDocumentParams(text_document=lsp.TextDocumentIdentifier(uri)))
        assert codes(await wait_for_diagnostics(client, uri, 2, since=mark)) == ["GG101"]

        mark = len(client.published)
        client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(settings={"gradguard": {"enable": False}}))
        assert list((await wait_for_diagnostics(client, uri, 2, since=mark)).diagnostics) == []
        assert await hover(client, uri, GRU_LINE, 10) is None
        # logLevel "error": the client's output got nothing below errors (not even the start banner)
        assert not [m for m in client.log_messages if m.type != lsp.MessageType.Error]


async def test_log_file_and_log_messages(session, tmp_path):
    log = tmp_path / "server.log"
    async with session(init_options={"debounce": 20, "logLevel": "debug"}, server_args=["--log-file", str(log), "--log-level", "debug"]) as client:
        uri = file_uri(tmp_path, "l.py")
        open_doc(client, uri, GRU_SEED, 1)
        await wait_for_diagnostics(client, uri, 1)
        for _ in range(100):
            if any("published" in m.message for m in client.log_messages):
                break
            await asyncio.sleep(0.05)
        ready = [m.message for m in client.log_messages if "ready" in m.message]
        assert ready and "0.1" in ready[0] and "'debounce': 20" in ready[0]  # version and effective settings
        assert any("published 1 diagnostic" in m.message for m in client.log_messages)
    text = log.read_text(encoding="utf-8")
    assert "language server starting" in text and "ready" in text and "published" in text
