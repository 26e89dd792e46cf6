"""Desktop adapters, chosen by name. Vendor packages are imported only by the adapter that needs them."""
