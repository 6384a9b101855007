"""Sources in git: mirrors and checkouts, ref resolution, build requirements read from a commit."""
