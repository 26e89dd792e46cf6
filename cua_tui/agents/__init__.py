"""Agent adapters, chosen by name. Vendor SDKs are imported only by the adapter that needs them."""
