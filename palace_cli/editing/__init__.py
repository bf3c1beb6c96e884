"""Writing to a palace: creating, changing, moving and checking notes, versions of facts, git set-up."""
