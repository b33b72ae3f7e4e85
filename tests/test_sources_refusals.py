"""Files a data source refuses, each with its reason, and the refresh goes on:
unknown types, oversize files, links and paths that lead outside the
folder, compressed-text bombs, corrupt, encrypted and binary files, special
files, and files past the source's count limit."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pypdf
import pytest

from backend.sources.documents import DocumentRefused, Problem, read_document
from backend.sources.folders import scan_folder
from backend.sources.index import SourceIndex
from backend.sources.pdfs import expansion_cap, read_pdf
from backend.sources.refresh import Limits
from tests.pdf_files import pdf_bytes

GOOD = "# Kept\n\nThe lighthouse keeper winds the clock at dusk.\n"
SECRET = "# Secret\n\nThe vault combination is nightingale.\n"


def bomb() -> bytes:
    """A small PDF whose page expands to megabytes of text."""
    line = "all work and no play makes a dull garden " * 4
    return pdf_bytes(["\n".join([line] * 20_000)], compress=True)


def encrypted() -> bytes:
    writer = pypdf.PdfWriter(clone_from=io.BytesIO(pdf_bytes(["locked away"])))
    writer.encrypt("a password", algorithm="RC4-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    """A source folder with one good document and every kind of bad one,
    and a folder outside it with a secret."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text(SECRET)
    folder = tmp_path / "source"
    folder.mkdir()
    (folder / "kept.md").write_text(GOOD)
    (folder / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    (folder / "report.docx").write_bytes(b"PK\x03\x04")
    (folder / "huge.txt").write_text("lighthouse " * 3000)  # 33,000 bytes
    (folder / "leak.md").symlink_to(outside / "secret.md")
    (folder / "escape").symlink_to(outside, target_is_directory=True)
    (folder / "dangling.md").symlink_to(tmp_path / "nowhere.md")
    (folder / "bomb.pdf").write_bytes(bomb())
    (folder / "corrupt.pdf").write_bytes(b"%PDF-1.4\n1 0 obj << /Type /Catalog")
    (folder / "locked.pdf").write_bytes(encrypted())
    (folder / "binary.txt").write_bytes(b"text\x00\x01\x02 then binary")
    os.mkfifo(folder / "pipe.md")
    (folder / ".hidden.md").write_text(SECRET)
    (folder / ".git").mkdir()
    (folder / ".git" / "HEAD.md").write_text(SECRET)
    return folder, outside


EXPECTED = [
    Problem(
        "binary.txt",
        "invalid",
        "holds binary data, not text",
    ),
    Problem(
        "corrupt.pdf",
        "invalid",
        "is not a valid PDF (PdfStreamError: Stream has ended unexpectedly)",
    ),
    Problem("dangling.md", "unreadable", "is a broken link"),
    Problem(
        "escape", "outside_folder", "is a link that leads outside the source's folder"
    ),
    Problem("huge.txt", "too_large", "is 33,000 bytes, over the limit of 30,000 bytes"),
    Problem(
        "leak.md", "outside_folder", "is a link that leads outside the source's folder"
    ),
    Problem(
        "photo.png",
        "unknown_type",
        "is of a type that is not indexed (.png); indexed: .md, .markdown, .txt, "
        ".rst, .html, .htm, .pdf",
    ),
    Problem("pipe.md", "unknown_type", "is not a regular file"),
    Problem(
        "report.docx",
        "unknown_type",
        "is of a type that is not indexed (.docx); indexed: .md, .markdown, .txt, "
        ".rst, .html, .htm, .pdf",
    ),
]


async def test_every_bad_file_is_refused_with_its_reason_and_the_rest_indexed(
    layout: tuple[Path, Path],
) -> None:
    """A refresh indexes only the good file and refuses each bad one with its reason."""
    folder, _ = layout
    limits = Limits(max_file_bytes=30_000)
    index = await SourceIndex.open(":memory:", {"docs": folder}, limits=limits)
    try:
        report = await index.refresh("docs")
        by_path = {p.path: p for p in report.refused}
        pdfs = {name: by_path.pop(name) for name in ("bomb.pdf", "locked.pdf")}
        assert sorted(by_path.values(), key=lambda p: p.path) == EXPECTED
        assert pdfs["locked.pdf"] == Problem(
            "locked.pdf", "unreadable", "is an encrypted PDF"
        )
        size = len(bomb())
        assert pdfs["bomb.pdf"] == Problem(
            "bomb.pdf",
            "bomb",
            f"expands to more than {expansion_cap(size):,} bytes of content from "
            f"{size:,} bytes (a compressed bomb?)",
        )
        assert (report.added, report.read) == (1, 5)  # kept, and 4 refused on reading
        assert await index.documents("docs") == {"kept.md": 1}
        assert await index.search("vault combination nightingale") == []
        assert (await index.search("lighthouse keeper"))[0].path == "kept.md"
        assert await index.problems("docs") == list(report.refused)
    finally:
        await index.aclose()


def test_a_path_that_climbs_out_of_the_folder_is_refused(
    layout: tuple[Path, Path],
) -> None:
    """Reading via `..`, a folder link or a file link out of the source is refused."""
    folder, _ = layout
    root = folder.resolve()
    for path in ("../outside/secret.md", "escape/secret.md", "leak.md"):
        with pytest.raises(DocumentRefused) as caught:
            read_document(root, path, 10_000)
        assert (caught.value.reason, str(caught.value)) == (
            "outside_folder",
            "leads outside the source's folder",
        )
    assert read_document(root, "kept.md", 10_000) == GOOD.encode()


def test_a_file_that_grew_past_the_limit_since_the_walk_is_refused(
    layout: tuple[Path, Path],
) -> None:
    """A file over the size limit when read is refused as too large, with its size."""
    folder, _ = layout
    with pytest.raises(DocumentRefused) as caught:
        read_document(folder.resolve(), "kept.md", 10)
    assert (caught.value.reason, str(caught.value)) == (
        "too_large",
        f"is {len(GOOD)} bytes, over the limit of 10 bytes",
    )


def test_a_compressed_bomb_is_refused_before_its_text_is_extracted() -> None:
    """A small PDF inflating to megabytes is refused as a bomb; a plain one is read."""
    data = bomb()
    assert len(data) < 20_000
    with pytest.raises(DocumentRefused) as caught:
        read_pdf(data, default_title="bomb")
    assert caught.value.reason == "bomb"
    plain = pdf_bytes(["\n".join(["all work and no play"] * 50)])  # not compressed
    assert len(read_pdf(plain, default_title="plain").blocks) == 1


def test_a_linked_folder_inside_the_source_is_not_walked_twice(tmp_path: Path) -> None:
    """An in-source folder link is skipped; an in-source file link is listed."""
    folder = tmp_path / "source"
    (folder / "guides").mkdir(parents=True)
    (folder / "guides" / "start.md").write_text(GOOD)
    (folder / "shortcut").symlink_to(folder / "guides", target_is_directory=True)
    (folder / "alias.md").symlink_to(folder / "guides" / "start.md")
    scan = scan_folder(folder, max_files=10, max_file_bytes=10_000)
    assert [f.relative for f in scan.files] == ["alias.md", "guides/start.md"]
    assert scan.problems == ()


def test_files_past_the_count_limit_are_one_problem(tmp_path: Path) -> None:
    """Files past the per-source limit are left out and reported as one problem."""
    folder = tmp_path / "source"
    folder.mkdir()
    for number in range(5):
        (folder / f"{number}.md").write_text(GOOD)
    scan = scan_folder(folder, max_files=3, max_file_bytes=10_000)
    assert [f.relative for f in scan.files] == ["0.md", "1.md", "2.md"]
    assert scan.problems == (
        Problem(
            ".",
            "too_many_files",
            "2 more documents past the limit of 3 per source are not indexed",
        ),
    )
