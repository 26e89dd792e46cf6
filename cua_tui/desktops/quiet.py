"""The browser's quiet settings: Chromium asks nothing of anyone on its own, on every backend.

Left alone, Chromium (156 on the host, 150 in the image) asks Google for the time, an on-device model's
manifest, AI Mode's eligibility, the accounts in its cookie jar and a push-messaging check-in within five
seconds of its start, and for updates, dictionaries, safe-browsing lists and form hints later. The egress
proxy refuses each, so a clean run would never read 0 refused. These settings switch each request off
where it starts, from this one place: the flags (``FLAGS``, every backend's ``chromium_flags``) and the
managed policies (``policy_json``): the local sandbox binds them at /etc/chromium/policies, the Docker
image copies ``docker/desktop/cua-tui-quiet.json`` (this file's output, kept equal by a test) and the
stock image's install writes them. docs/backends/local.md, "A quiet browser".
"""

from __future__ import annotations

import json

# Where Debian's Chromium reads its managed policies (any *.json in it).
POLICY_DIR = "/etc/chromium/policies/managed"
POLICY_NAME = "cua-tui-quiet.json"
POLICY_PATH = f"{POLICY_DIR}/{POLICY_NAME}"

# Managed policies (names as chrome://policy lists them; each is in Chromium 156's own list).
POLICIES: dict[str, bool | int | str] = {
    # clients2.google.com/time: the network time the certificate checks compare with
    "BrowserNetworkTimeQueriesEnabled": False,
    # update.googleapis.com: components (CRLSet, certificate transparency, the model manifest)
    "ComponentUpdatesEnabled": False,
    "GenAILocalFoundationalModelSettings": 1,  # never download the on-device model
    # accounts.google.com: sign-in and sync
    "BrowserSignin": 0,
    "SyncDisabled": True,
    # safebrowsing.googleapis.com and the download checks: the allow-list decides what is reached
    "SafeBrowsingProtectionLevel": 0,
    "PasswordLeakDetectionEnabled": False,
    "PasswordManagerEnabled": False,
    # content-autofill.googleapis.com: field type hints for forms
    "AutofillAddressEnabled": False,
    "AutofillCreditCardEnabled": False,
    # the dictionaries (redirector.gvt1.com) and the spelling service
    "SpellcheckEnabled": False,
    "SpellCheckServiceEnabled": False,
    "TranslateEnabled": False,
    # www.googleapis.com: suggestions on an error page
    "AlternateErrorPagesEnabled": False,
    "SearchSuggestEnabled": False,
    "UrlKeyedAnonymizedDataCollectionEnabled": False,
    "MetricsReportingEnabled": False,
    "UserFeedbackAllowed": False,
    # no preconnects or prefetches: every request the proxy sees is one the page made
    "NetworkPredictionOptions": 2,
    # an http:// page is fetched as given, not tried over https first (a refusal nobody asked for)
    "HttpsUpgradesEnabled": False,
    "DnsOverHttpsMode": "off",
    "EnableMediaRouter": False,
    "ShoppingListEnabled": False,
    "PrivacySandboxPromptEnabled": False,
    "DefaultBrowserSettingEnabled": False,
    "PromotionalTabsEnabled": False,
    "BackgroundModeEnabled": False,
}

FEATURES_OFF = (
    "Translate",
    "MediaRouter",
    "OptimizationHints",
    "AutofillServerCommunication",
    "OptimizationGuideModelDownloading",
    "CertificateTransparencyComponentUpdater",
    "NetworkTimeServiceQuerying",
    # www.google.com/async/folae: AI Mode's eligibility, asked at start (no policy stops it)
    "AimEnabled",
    "AimServerEligibilityEnabled",
    "AimServerRequestOnStartupEnabled",
    # a preconnect to the search engine, and the DNS-over-HTTPS upgrade's probe
    "PreconnectToSearch",
    "DnsOverHttpsUpgrade",
)

# Flags: enough alone (measured), for a browser whose /etc has no policy file (an image built before it).
FLAGS = (
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    f"--disable-features={','.join(FEATURES_OFF)}",
    "--disable-client-side-phishing-detection",
    "--disable-domain-reliability",
    "--no-pings",
    "--disable-breakpad",
    # Three requests have neither a policy nor a flag of their own. Each goes to an address the browser
    # itself refuses before any proxy (data: for the component updater, port 1 is ERR_UNSAFE_PORT), so it
    # never leaves the browser:
    # - component updates asked for on demand, which --disable-component-update and the policy leave
    #   (the on-device model's manifest, update.googleapis.com, at every start);
    "--component-updater=url-source=data:,",
    # - the accounts in the cookie jar (accounts.google.com/ListAccounts, retried with back-off for the
    #   run's length; chromiumembedded/cef#4276): the browser's own sign-in origin moves, a page's visit
    #   to accounts.google.com is untouched;
    "--gaia-url=https://gaia.invalid:1/",
    # - the push messaging client's check-in (android.clients.google.com/checkin, Chromium 150, 5 s in).
    "--gcm-checkin-url=https://gcm.invalid:1/checkin",
)


def policy_json() -> str:
    """The managed policy file's text (sorted keys, so its bytes, and the Docker image's hash, are stable)."""
    return json.dumps(POLICIES, indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":  # python -m cua_tui.desktops.quiet > docker/desktop/cua-tui-quiet.json
    print(policy_json(), end="")
