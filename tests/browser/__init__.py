"""Browser tests: the chat page in a real Chromium (Playwright, async API)."""
