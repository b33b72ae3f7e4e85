"""A conversation's files: uploads and tools' artifacts, kept by content."""
