"""`vars plan --html`: the memory map draws each block's data, alignment padding and guards
from the logic base, marks shared blocks, lists them under the picture, escapes names and is
byte-identical across runs."""
from engine.cli import main
from engine.core.dumpio import save_model

from .conftest import NCHW, desc
from .graphs import GraphBuilder, tensor

BASE = 137_438_953_472


def test_memory_map(tmp_path, capsys):
    b = GraphBuilder("g")
    b.op("w", "Variable", outs=[desc((64, 3, 3, 3), NCHW)])                       # 6944 bytes
    lr = tensor(b"\0\0\x80\x3f", desc((1,)))
    b.op("lr", "Constant", outs=[desc((1,))], attrs={"value": lr})
    b.op("lr<copy>", "Constant", outs=[desc((1,))], attrs={"value": lr})          # byte-identical: shared
    g = tmp_path / "g.pbtxt"
    save_model(b.build(), g)
    maps = [tmp_path / "a.html", tmp_path / "b.html"]
    for m in maps:
        assert main(["vars", "plan", str(g), "--html", str(m)]) == 0
    html = maps[0].read_text()
    assert maps[0].read_bytes() == maps[1].read_bytes()
    assert "Content-Security-Policy" in html and "<script" not in html
    assert f"HBM: 2 blocks, {8192 + 1536} bytes from the logic base {BASE}" in html
    # w: 6944 bytes of data, 224 of padding to 7168, two 512-byte guards
    assert (f'<td class="n">+0</td><td class="n">{BASE}</td><td class="n">6944</td><td class="n">224</td>'
            '<td class="n">1024</td><td>w</td>') in html
    assert "<td>lr, lr&lt;copy&gt; (shared)</td>" in html and "lr<copy>" not in html
    assert html.count('class="shared"') == 1 and html.count('class="guard"') == 2
