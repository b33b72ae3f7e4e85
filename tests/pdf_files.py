"""Small PDF files written by hand, for the data-source tests.

`pdf_bytes(pages)` is a valid PDF 1.4 file with one page per string, each
line of it a line of Helvetica text, and a correct cross-reference table
(pypdf reads it without a warning). `compress=True` deflates the page
contents, as real PDFs do; a page of very repetitive text is then a small
file that expands a lot: a bomb.
"""

from __future__ import annotations

import io
import zlib
from collections.abc import Sequence


def pdf_bytes(
    pages: Sequence[str], *, compress: bool = False, title: str | None = None
) -> bytes:
    objects: list[bytes] = [b"", b""]  # 1: catalog, 2: the page tree
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    font = len(objects)
    kids: list[int] = []
    for text in pages:
        content = _content(text)
        if compress:
            content = zlib.compress(content, 9)
            head = b"<< /Length %d /Filter /FlateDecode >>" % len(content)
        else:
            head = b"<< /Length %d >>" % len(content)
        objects.append(head + b"\nstream\n" + content + b"\nendstream")
        contents = len(objects)
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792]"
            b" /Resources << /Font << /F1 %d 0 R >> >> /Contents %d 0 R >>"
            % (font, contents)
        )
        kids.append(len(objects))
    objects[0] = b"<< /Type /Catalog /Pages 2 0 R >>"
    listed = b" ".join(b"%d 0 R" % kid for kid in kids)
    objects[1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (listed, len(kids))
    info = None
    if title is not None:
        objects.append(b"<< /Title (%s) >>" % _escape(title))
        info = len(objects)
    return _file(objects, info)


def _content(text: str) -> bytes:
    ops = [b"BT", b"/F1 11 Tf", b"14 TL", b"72 740 Td"]
    ops += [b"(%s) Tj T*" % _escape(line) for line in text.split("\n")]
    ops.append(b"ET")
    return b"\n".join(ops)


def _escape(text: str) -> bytes:
    raw = text.encode("latin-1")
    return raw.replace(b"\\", b"\\\\").replace(b"(", b"\\(").replace(b")", b"\\)")


def _file(objects: list[bytes], info: int | None) -> bytes:
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n%s\nendobj\n" % (number, body))
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for offset in offsets:
        out.write(b"%010d 00000 n \n" % offset)
    trailer = b"/Size %d /Root 1 0 R" % (len(objects) + 1)
    if info is not None:
        trailer += b" /Info %d 0 R" % info
    out.write(b"trailer\n<< %s >>\nstartxref\n%d\n%%%%EOF\n" % (trailer, xref))
    return out.getvalue()
