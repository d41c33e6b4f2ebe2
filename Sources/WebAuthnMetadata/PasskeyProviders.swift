public import Foundation
public import Logging
public import ServiceLifecycle
public import WebAuthnCore
package import _WebAuthnEncoding
internal import _WebAuthnHTTP
#if canImport(FoundationNetworking)
    internal import FoundationNetworking
#endif

/// A passkey provider's display name and icons, for account settings.
public struct PasskeyProvider: Sendable, Equatable {
    /// The name people recognise, such as "iCloud Keychain".
    public let name: String
    /// An icon for light backgrounds: a `data:image/…` URI, or nil.
    public let iconLight: String?
    /// An icon for dark backgrounds: a `data:image/…` URI, or nil.
    public let iconDark: String?

    /// A provider; icons that are not `data:image/png`, `jpeg`, `webp` or `svg+xml` URIs are dropped.
    public init(name: String, iconLight: String? = nil, iconDark: String? = nil) {
        self.name = name
        self.iconLight = iconLight.flatMap(Self.safeIcon)
        self.iconDark = iconDark.flatMap(Self.safeIcon)
    }

    /// Whether `name` can be shown as a provider's name: a display name in its enforced form
    /// (``UserName/normalize(displayName:)``: 1 to 64 Unicode scalars, no control, format,
    /// default-ignorable or blank character, so no bidi override or isolate, zero-width
    /// character, variation selector or filler; one space between words; no mark on nothing,
    /// at most four on one character). A list
    /// name with U+202E showed in account settings reversed, one with a zero-width space or a
    /// Hangul filler looked like another provider's, and one of stacked marks ran to hundreds of
    /// scalars (red team).
    public static func isDisplayableName(_ name: String) -> Bool {
        guard let enforced = try? UserName.normalize(displayName: name) else { return false }
        return enforced.unicodeScalars.elementsEqual(name.unicodeScalars)
    }

    /// Icons are shown in `<img src>` (where an SVG runs no script); only image data URIs
    /// of at most 64 KiB pass, so a list cannot point a page at a tracker or a script.
    static func safeIcon(_ uri: String) -> String? {
        let prefixes = ["data:image/png;base64,", "data:image/jpeg;base64,", "data:image/webp;base64,", "data:image/svg+xml;base64,"]
        guard uri.utf8.count <= 64 * 1024, prefixes.contains(where: { uri.hasPrefix($0) }) else { return nil }
        return uri
    }
}

/// The community list of passkey-provider AAGUIDs
/// (github.com/passkeydeveloper/passkey-authenticator-aaguids, `aaguid.json`):
/// AAGUID → name and icons of iCloud Keychain, Google Password Manager, Windows
/// Hello, 1Password and others. For naming credentials only, never for trust
/// (FIDO metadata stays the authority). Its repository has no licence file, so
/// the list is loaded at run time from a file or its URL, never compiled in.
public struct PasskeyProviderList: Sendable {
    /// The providers by AAGUID.
    public let providers: [AAGUID: PasskeyProvider]
    /// Entries skipped because they were malformed (a bad AAGUID, no name, a name that is not
    /// ``PasskeyProvider/isDisplayableName(_:)``).
    public let skipped: Int

    /// The published list.
    public static let publishedURL = URL(string: "https://raw.githubusercontent.com/passkeydeveloper/passkey-authenticator-aaguids/main/aaguid.json")!
    /// The largest list accepted (the list was about 200 KiB in 2026).
    public static let maxSize = 4 << 20
    /// An empty list (a retired list is an empty object: report it, do not hide it).
    public static let empty = PasskeyProviderList(providers: [:], skipped: 0)

    /// A list of the given providers.
    public init(providers: [AAGUID: PasskeyProvider], skipped: Int = 0) {
        self.providers = providers
        self.skipped = skipped
    }

    /// Parses the list's JSON: an object of lowercase AAGUIDs to `{name, icon_light?, icon_dark?}`.
    /// Throws `metadata_invalid` for anything that is not such an object, or over ``maxSize``.
    public init(json bytes: [UInt8]) throws(WebAuthnError) {
        guard bytes.count <= Self.maxSize else {
            throw WebAuthnError(.inputTooLarge, "the passkey provider list is \(bytes.count) bytes; at most \(Self.maxSize) are read")
        }
        let value: JSONValue
        do { value = try JSONValue.parse(bytes, limits: JSONLimits(maxBytes: Self.maxSize, maxDepth: 4)) } catch {
            throw WebAuthnError(.metadataInvalid, "the passkey provider list is not JSON: \(error.message)")
        }
        guard let object = value.objectValue else { throw WebAuthnError(.metadataInvalid, "the passkey provider list is not a JSON object") }
        var providers: [AAGUID: PasskeyProvider] = [:]
        var skipped = 0
        for key in object.keys {
            guard let aaguid = AAGUID(key), let entry = object[key], let name = entry["name"]?.stringValue,
                PasskeyProvider.isDisplayableName(name)
            else {
                skipped += 1
                continue
            }
            providers[aaguid] = PasskeyProvider(name: name, iconLight: entry["icon_light"]?.stringValue, iconDark: entry["icon_dark"]?.stringValue)
        }
        self.init(providers: providers, skipped: skipped)
    }

    /// Reads the list from a file.
    public static func load(path: String) throws(WebAuthnError) -> PasskeyProviderList {
        try PasskeyProviderList(json: FIDOMetadata.read(path))
    }

    /// Whether the list names no provider (a retired list, or a failed load).
    public var isEmpty: Bool { providers.isEmpty }
}

/// How a credential is named in account settings: its owner's name for it, and
/// the provider's name and icon found from its AAGUID.
public struct CredentialLabel: Sendable, Equatable {
    /// Where the provider name came from.
    public enum Source: String, Sendable {
        /// The FIDO metadata statement of the AAGUID (`friendlyNames`, else `description`).
        case metadata
        /// The community passkey-provider list.
        case providerList = "provider-list"
        /// Neither knows the AAGUID: "Passkey" or "Security key", from the attachment and transports.
        case fallback
    }

    /// The provider's name ("iCloud Keychain", "YubiKey 5 Series", "Passkey").
    public let provider: String
    /// The provider's icon for light backgrounds (a data URI), if known.
    public let iconLight: String?
    /// The provider's icon for dark backgrounds (a data URI), if known.
    public let iconDark: String?
    /// Where ``provider`` came from.
    public let source: Source
}

/// Names credentials for people: FIDO metadata first, then the community
/// passkey-provider list, then "Passkey" or "Security key".
public struct ProviderNames: Sendable {
    /// Looks up the metadata entry of an AAGUID (for example the engine's trust anchors).
    public let metadata: @Sendable (AAGUID) -> MetadataEntry?
    /// The community list (``PasskeyProviderList/empty`` when none is loaded).
    public let list: PasskeyProviderList

    /// A resolver over a metadata lookup and a provider list.
    public init(metadata: @escaping @Sendable (AAGUID) -> MetadataEntry? = { _ in nil }, list: PasskeyProviderList = .empty) {
        self.metadata = metadata
        self.list = list
    }

    /// The label of `credential`.
    public func label(for credential: CredentialRecord) -> CredentialLabel {
        if credential.aaguid != .zero {
            if let entry = metadata(credential.aaguid), PasskeyProvider.isDisplayableName(entry.displayName()) {
                // MDS3 icons are data URIs (PNG); anything else is dropped as for the list.
                let icon = entry.icon.flatMap(PasskeyProvider.safeIcon)
                return CredentialLabel(provider: entry.displayName(), iconLight: icon, iconDark: icon, source: .metadata)
            }
            if let provider = list.providers[credential.aaguid] {
                return CredentialLabel(provider: provider.name, iconLight: provider.iconLight, iconDark: provider.iconDark, source: .providerList)
            }
        }
        return CredentialLabel(provider: Self.fallbackName(credential), iconLight: nil, iconDark: nil, source: .fallback)
    }

    /// "Passkey" for a credential that is synced, discoverable or on a platform authenticator;
    /// "Security key" for one that came over USB, NFC or BLE from a roaming authenticator.
    static func fallbackName(_ c: CredentialRecord) -> String {
        if c.backupEligible || c.properties.authenticatorAttachment == .platform || c.transports.contains(.internal) || c.transports.contains(.hybrid) {
            return "Passkey"
        }
        let roaming: [AuthenticatorTransport] = [.usb, .nfc, .ble, .smartCard]
        if c.properties.authenticatorAttachment == .crossPlatform || c.transports.contains(where: roaming.contains) { return "Security key" }
        return "Passkey"
    }
}

/// The passkey-provider list a server shows, replaceable while it runs: loaded from a
/// file, or fetched from the list's URL at start and daily (``PasskeyProviderService``),
/// with an optional cache file for starts without network.
public final class PasskeyProviderDirectory: Sendable {
    private let current: Locked<PasskeyProviderList>

    /// A directory holding `list`.
    public init(_ list: PasskeyProviderList = .empty) { current = Locked(list) }

    /// The list in use.
    public var list: PasskeyProviderList { current.withLock { $0 } }

    /// Replaces the list.
    public func install(_ list: PasskeyProviderList) { current.withLock { $0 = list } }

    /// Fetches the list from `url` (https, or http to a loopback address) within 30 s and
    /// ``PasskeyProviderList/maxSize`` bytes, installs it and, with `cache`, writes it there
    /// (atomically). A failure keeps the list in use. An empty list is installed: it is how
    /// the list's maintainers retire it, and the caller reports it.
    @discardableResult
    public func refresh(from url: URL, cache: String? = nil) async throws(WebAuthnError) -> PasskeyProviderList {
        guard CappedHTTP.isFetchable(url) else {
            throw WebAuthnError(.configurationInvalid, "the passkey-provider list URL must be https (or http to a loopback address)")
        }
        let response = try await CappedHTTP.send(
            URLRequest(url: url), maxBytes: PasskeyProviderList.maxSize, timeout: 30, deadline: 60, redirects: .httpsOnly, failure: .metadataUnavailable)
        guard response.status == 200 else {
            throw WebAuthnError(.metadataUnavailable, "the passkey-provider list answered HTTP \(response.status)")
        }
        let list = try PasskeyProviderList(json: response.body)
        install(list)
        if let cache {
            do { try AtomicFile.save(response.body, to: cache) } catch {
                throw WebAuthnError(.storageFailure, "the passkey-provider list was installed but not cached: \(error)")
            }
        }
        return list
    }
}

/// Keeps a ``PasskeyProviderDirectory`` current from the list's URL: a fetch at start and
/// every day (an hour after a failure), logging what it installed or why it kept the old list.
public struct PasskeyProviderService: Service {
    let directory: PasskeyProviderDirectory
    let url: URL
    let cache: String?
    let logger: Logger

    /// A service fetching `url` into `directory`, caching to `cache` when given.
    public init(directory: PasskeyProviderDirectory, url: URL, cache: String? = nil, logger: Logger = Logger(label: "webauthn.providers")) {
        self.directory = directory
        self.url = url
        self.cache = cache
        self.logger = logger
    }

    /// Fetches now, then daily, until cancelled or the group shuts down.
    public func run() async throws {
        await cancelWhenGracefulShutdown { await loop() }
    }

    func loop() async {
        while !Task.isCancelled {
            var wait: Duration = .seconds(24 * 3600)
            do {
                let list = try await directory.refresh(from: url, cache: cache)
                if list.isEmpty {
                    logger.warning("the passkey-provider list names no provider (retired?); credentials fall back to metadata and Passkey / Security key")
                } else {
                    logger.info("passkey-provider list installed", metadata: ["providers": .stringConvertible(list.providers.count)])
                }
            } catch {
                wait = .seconds(3600)
                logger.warning(
                    "passkey-provider list not refreshed; keeping the one in use",
                    metadata: ["code": .string(error.code.rawValue), "reason": .string(error.message)])
            }
            do { try await Task.sleep(for: wait) } catch { return }
        }
    }
}
