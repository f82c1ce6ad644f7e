"""GPT-2 weights in the Hub's layout: loading, generating, saving, pushing; never the network.

``transformers`` (a test-only dependency) builds tiny random GPT-2s and is the oracle: our
model must give its logits and its greedy tokens. The Hub itself is either switched off
(``HF_HUB_OFFLINE``), unreachable (a closed loopback port) or a loopback server of the
test's own that answers like huggingface.co.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import socket
import subprocess
import threading
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file
from support import forkserver

from gpt import checkpoint, generate, hub
from gpt.model import GPT, GPTConfig, preset
from solutions import generation

transformers = pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[2]
TINY = dict(n_layer=2, n_head=2, n_embd=32, n_positions=64)


def _hf_model(vocab_size: int = 101, seed: int = 0):
    torch.manual_seed(seed)
    # No end-of-text token: generate() must run the full length, with nothing suppressed.
    config = transformers.GPT2Config(
        vocab_size=vocab_size, bos_token_id=None, eos_token_id=None, **TINY
    )
    return transformers.GPT2LMHeadModel(config).eval()


@pytest.fixture(scope="module")
def hf_folder(tmp_path_factory: pytest.TempPathFactory) -> tuple[object, Path]:
    """A tiny random GPT-2 saved by transformers (config.json + model.safetensors)."""
    model = _hf_model()
    folder = tmp_path_factory.mktemp("hf") / "tiny-gpt2"
    model.save_pretrained(folder, safe_serialization=True)
    return model, folder


def _hub_layout(model, folder: Path) -> Path:
    """The files as openai-community/gpt2 has them: no ``transformer.`` prefix, no lm_head,
    and the causal-mask buffers ``h.N.attn.bias`` that are not parameters."""
    folder.mkdir(parents=True, exist_ok=True)
    tensors = {
        key.removeprefix("transformer."): value.contiguous()
        for key, value in model.state_dict().items()
        if key != "lm_head.weight"
    }
    n = model.config.n_positions
    for i in range(model.config.n_layer):
        tensors[f"h.{i}.attn.bias"] = torch.tril(torch.ones(n, n)).view(1, 1, n, n)
    save_file(tensors, str(folder / hub.WEIGHTS_NAME), metadata={"format": "pt"})
    (folder / hub.CONFIG_NAME).write_text(model.config.to_json_string())
    return folder


def _ids(vocab: int = 101, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, vocab, (2, 12), generator=torch.Generator().manual_seed(seed))


def _assert_logits_match(ours: GPT, theirs, ids: torch.Tensor) -> None:
    with torch.no_grad():
        torch.testing.assert_close(ours(ids), theirs(ids).logits, rtol=0, atol=1e-5)


def test_transformers_folder_gives_transformers_logits(hf_folder) -> None:
    theirs, folder = hf_folder
    ours = hub.from_pretrained(folder)
    assert not ours.training and ours.config.block_size == 64 and ours.config.dropout == 0.0
    assert ours.lm_head.weight is ours.transformer.wte.weight
    _assert_logits_match(ours, theirs, _ids())
    # The weights file itself works too (config.json is read beside it).
    _assert_logits_match(hub.from_pretrained(folder / "model.safetensors"), theirs, _ids(seed=2))


def test_greedy_generation_equals_transformers(hf_folder) -> None:
    theirs, folder = hf_folder
    ours = hub.from_pretrained(folder)
    prompt = _ids()[:, :5]
    mine = generation.generate(ours, prompt, 20, ours.config.block_size, temperature=0)
    with torch.no_grad():
        want = theirs.generate(
            prompt,
            attention_mask=torch.ones_like(prompt),
            do_sample=False,
            max_new_tokens=20,
            pad_token_id=0,
        )
    assert torch.equal(mine, want)


def test_the_hubs_own_file_layout_loads(hf_folder, tmp_path: Path) -> None:
    theirs, _ = hf_folder
    ours = hub.from_pretrained(_hub_layout(theirs, tmp_path / "gpt2"))
    _assert_logits_match(ours, theirs, _ids())


def test_save_pretrained_round_trip_keeps_every_tensor_and_the_tie(tmp_path: Path) -> None:
    torch.manual_seed(3)
    config = GPTConfig(vocab_size=101, block_size=64, n_layer=2, n_head=2, n_embd=32)
    model = GPT(config)
    with torch.no_grad():  # make the biases and gains non-trivial, so a lost one shows
        for param in model.parameters():
            param.add_(torch.randn_like(param) * 0.1)
    folder = hub.save_pretrained(model, tmp_path / "mine")
    assert sorted(p.name for p in folder.iterdir()) == ["config.json", "model.safetensors"]
    assert "lm_head.weight" not in load_file(str(folder / "model.safetensors"))  # stored once

    loaded = hub.from_pretrained(folder, dropout=0.1)
    assert loaded.config == GPTConfig(**{**config.to_dict(), "dropout": 0.1})
    assert loaded.lm_head.weight is loaded.transformer.wte.weight
    assert all(p.requires_grad for p in loaded.parameters())  # ready to fine-tune
    want = model.state_dict()
    got = loaded.state_dict()
    assert got.keys() == want.keys()
    for key in want:
        assert torch.equal(got[key], want[key]), key

    # It is GPT-2's layout: transformers reads the folder and computes the same logits.
    theirs = transformers.GPT2LMHeadModel.from_pretrained(folder).eval()
    _assert_logits_match(model.eval(), theirs, _ids())


def test_saving_over_a_model_replaces_it_whole(tmp_path: Path) -> None:
    small = GPTConfig(vocab_size=101, block_size=16, n_layer=1, n_head=2, n_embd=8)
    folder = tmp_path / "model"
    hub.save_pretrained(GPT(small), folder)
    bigger = GPT(GPTConfig(**{**small.to_dict(), "n_layer": 2}))
    hub.save_pretrained(bigger, folder)
    assert hub.from_pretrained(folder).config.n_layer == 2
    assert sorted(p.name for p in folder.iterdir()) == ["config.json", "model.safetensors"]


def test_push_to_hub_uploads_the_folder_that_from_pretrained_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import huggingface_hub

    calls: dict[str, object] = {}
    pushed = tmp_path / "pushed"

    class FakeApi:
        def __init__(self, token=None):
            calls["token"] = token

        def create_repo(self, repo_id, private=None, exist_ok=False):
            calls["create"] = (repo_id, private, exist_ok)

        def upload_folder(self, repo_id, folder_path, commit_message):
            calls["upload"] = repo_id
            pushed.mkdir()
            for path in Path(folder_path).iterdir():
                (pushed / path.name).write_bytes(path.read_bytes())
            return type("Commit", (), {"commit_url": f"https://hub.test/{repo_id}/commit/1"})()

    monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi)
    model = GPT(GPTConfig(vocab_size=101, block_size=16, n_layer=1, n_head=2, n_embd=8))
    url = hub.push_to_hub(model, "me/course-gpt", token="t0k")
    assert url == "https://hub.test/me/course-gpt/commit/1"
    assert calls == {
        "token": "t0k",
        "create": ("me/course-gpt", None, True),
        "upload": "me/course-gpt",
    }
    assert {p.name for p in pushed.iterdir()} == {"config.json", "model.safetensors", "README.md"}
    assert torch.equal(
        hub.from_pretrained(pushed).transformer.wte.weight, model.transformer.wte.weight
    )


def test_gpt2_weights_dir_stands_in_for_the_hub(
    hf_folder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    theirs, _ = hf_folder
    _hub_layout(theirs, tmp_path / "gpt2-medium")
    monkeypatch.setenv(hub.LOCAL_ENV, str(tmp_path))
    assert hub.available("gpt2-medium")
    _assert_logits_match(hub.from_pretrained("gpt2-medium"), theirs, _ids())


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ("gpt3", "unknown model 'gpt3'"),
        ("./nowhere", "no such file or folder: ./nowhere"),
    ],
)
def test_bad_names_are_one_clear_line(spec: str, needle: str) -> None:
    with pytest.raises(hub.HubError, match=needle) as caught:
        hub.from_pretrained(spec)
    assert "\n" not in str(caught.value)


def test_folders_that_are_not_gpt2_are_one_clear_line(hf_folder, tmp_path: Path) -> None:
    theirs, folder = hf_folder
    (tmp_path / "empty").mkdir()
    with pytest.raises(hub.HubError, match="has no config.json"):
        hub.from_pretrained(tmp_path / "empty")
    relu = _hub_layout(theirs, tmp_path / "relu")
    config = json.loads((relu / "config.json").read_text())
    (relu / "config.json").write_text(json.dumps({**config, "activation_function": "relu"}))
    with pytest.raises(hub.HubError, match="activation_function='relu'"):
        hub.from_pretrained(relu)
    wrong = _hub_layout(theirs, tmp_path / "wrong")
    (wrong / "config.json").write_text(json.dumps({**config, "n_embd": 64}))
    with pytest.raises(hub.HubError, match="does not match its config.json"):
        hub.from_pretrained(wrong)


# ------------------------------------------------------------- the Hub, switched off or faked


# `python -m gpt.generate` with huggingface_hub's waits between retries skipped (about 20 s of
# sleeping when the Hub is unreachable); the retries themselves still happen.
NO_RETRY_WAITS = (
    "import time, runpy; time.sleep = lambda seconds: None; "
    "runpy.run_module('gpt.generate', run_name='__main__', alter_sys=True)"
)


def _cli(*args: str, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "GPT2_WEIGHTS"))}
    clean.update(PYTHONPATH=str(ROOT), HF_HUB_DISABLE_TELEMETRY="1", **env)
    return forkserver.run(
        ["-c", NO_RETRY_WAITS, *args],
        cwd=ROOT,
        env=clean,
        capture_output=True,
        text=True,
        timeout=1800,  # a hang guard only
    )


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again on exit: connections are refused


@pytest.mark.parametrize("how", ["offline", "unreachable"])
def test_no_hub_is_one_line_that_says_how_to_use_a_local_copy(how: str, tmp_path: Path) -> None:
    env = {"HF_HOME": str(tmp_path / "hf-home")}  # an empty cache
    if how == "offline":
        env["HF_HUB_OFFLINE"] = "1"
    else:
        env["HF_ENDPOINT"] = f"http://127.0.0.1:{_closed_port()}"
    done = _cli("Hello", "--model", "gpt2", **env)
    assert done.returncode == 2 and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    line = lines[0]
    assert line.startswith("error: cannot download openai-community/gpt2 from the Hugging Face Hub")
    assert ("HF_HUB_OFFLINE" in line) == (how == "offline")
    assert "GPT2_WEIGHTS_DIR" in line and "folder with config.json and model.safetensors" in line


class _FakeHub(http.server.BaseHTTPRequestHandler):
    """Answers ``/{owner}/{name}/resolve/{revision}/{file}`` like huggingface.co."""

    files: dict[str, bytes] = {}
    requests: list[str] = []
    COMMIT = "0123456789abcdef0123456789abcdef01234567"

    def _answer(self, body: bool) -> None:
        self.requests.append(f"{self.command} {self.path}")
        parts = self.path.split("/")
        name = "/".join(parts[1:3])
        data = self.files.get(f"{name}/{parts[-1]}") if "resolve" in parts else None
        if data is None:
            self.send_response(404)
            self.send_header("X-Error-Code", "RepoNotFound")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("X-Repo-Commit", self.COMMIT)
        self.send_header("ETag", '"' + hashlib.sha256(data).hexdigest() + '"')
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if body:
            self.wfile.write(data)

    def do_HEAD(self) -> None:  # noqa: N802
        self._answer(body=False)

    def do_GET(self) -> None:  # noqa: N802
        self._answer(body=True)

    def log_message(self, *args) -> None:
        pass


def test_gpt2_downloads_from_the_hub_once_then_generates_offline(tmp_path: Path) -> None:
    """The real hf_hub_download path against a loopback Hub serving openai-community/gpt2."""
    theirs = _hf_model(vocab_size=50257, seed=4)  # GPT-2's vocabulary, so prompts encode
    folder = _hub_layout(theirs, tmp_path / "served")
    _FakeHub.files = {
        f"openai-community/gpt2/{name}": (folder / name).read_bytes()
        for name in (hub.CONFIG_NAME, hub.WEIGHTS_NAME)
    }
    _FakeHub.requests = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _FakeHub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    home = str(tmp_path / "hf-home")
    args = ("The tide", "--model", "gpt2", "--max-new-tokens", "8", "--temperature", "0")
    try:
        online = _cli(*args, HF_HOME=home, HF_ENDPOINT=f"http://127.0.0.1:{server.server_port}")
    finally:
        server.shutdown()
        server.server_close()
    assert online.returncode == 0, online.stderr
    fetched = {r.split()[1] for r in _FakeHub.requests if r.startswith("GET")}
    assert fetched == {
        "/openai-community/gpt2/resolve/main/config.json",
        "/openai-community/gpt2/resolve/main/model.safetensors",
    }
    # The same text as transformers' greedy continuation, decoded with GPT-2's tokenizer.
    from gpt.vocab import gpt2_encoding

    enc = gpt2_encoding()
    prompt = torch.tensor([enc.encode_ordinary("The tide")])
    with torch.no_grad():
        want = theirs.generate(
            prompt, attention_mask=torch.ones_like(prompt), do_sample=False,
            max_new_tokens=8, pad_token_id=0,
        )  # fmt: skip
    assert online.stdout == "The tide" + enc.decode(want[0, prompt.shape[1] :].tolist()) + "\n"
    # Downloaded once: offline now, the cache answers.
    offline = _cli(*args, HF_HOME=home, HF_HUB_OFFLINE="1")
    assert offline.returncode == 0, offline.stderr
    assert offline.stdout == online.stdout


def test_generate_cli_reads_a_training_runs_checkpoint(tmp_path: Path) -> None:
    torch.manual_seed(5)
    config = preset("micro")
    model = GPT(config).eval()
    run = tmp_path / "runs" / "default"
    checkpoint.save(
        run / "checkpoint.pt", {"model": model.state_dict(), "model_config": config.to_dict()}
    )
    loaded = generate.load_model(str(run))
    assert not loaded.training and loaded.config.dropout == 0.0
    for key, value in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[key], value)
    want = generate.generate_text(model, "A cat", max_new_tokens=5, temperature=0)
    done = _cli("A cat", "--model", str(run), "--max-new-tokens", "5", "--temperature", "0")
    assert done.returncode == 0, done.stderr
    assert done.stdout == want + "\n" and want.startswith("A cat") and len(want) > len("A cat")


def test_generate_cli_bad_input_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "checkpoint.pt").write_bytes(b"not a checkpoint")
    done = _cli("Hi", "--model", str(tmp_path))
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "corrupt" in done.stderr
