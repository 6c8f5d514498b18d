"""Package-wide rules: the layering and the standard-library-only runtime."""
