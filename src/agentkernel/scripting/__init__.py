"""Running scripts: the host, the engines, and the helper table they share."""
