"""From a concept file's bytes to data: frontmatter, Markdown, inline links, typed reads."""
