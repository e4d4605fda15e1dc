"""Local HTTP servers that speak the pricing APIs skyless reads, with their real response shapes."""
