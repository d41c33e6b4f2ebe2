internal import Foundation
internal import Logging
internal import WebAuthnCore
internal import _WebAuthnEncoding
internal import _WebAuthnCrypto

// The metadata service's disk cache: the last verified BLOB and its HTTP validators, written
// atomically and verified again before it is installed at start.
extension MetadataService {
    static let cacheName = "mds-blob.jwt"
    static let validatorsName = "mds-blob.validators.json"

    /// Verifies the cached BLOB again (chain and signature at the engine's time; one past its
    /// `nextUpdate` is used, with a warning, until a newer one is fetched) and installs it.
    /// Returns whether it did; a missing or bad cache is logged and skipped.
    @discardableResult
    public func loadCache() async -> Bool {
        guard let directory = configuration.cacheDirectory else { return false }
        let path = (directory as NSString).appendingPathComponent(Self.cacheName)
        guard FileManager.default.fileExists(atPath: path) else {
            logger.info("no cached metadata BLOB yet", metadata: ["path": .string(path)])
            return false
        }
        let now = clock.now()
        do throws(WebAuthnError) {
            let bytes = try FIDOMetadata.read(path)
            var options = currentVerification()
            options.refuseStale = false
            let blob = try FIDOMetadata.blob(jwt: bytes, at: now, options: options)
            let written = (try? FileManager.default.attributesOfItem(atPath: path)[.modificationDate] as? Date) ?? nil
            guard
                install(blob, validators: readValidators(directory, matching: bytes), confirmedAt: min(written ?? now, now), fromCache: true)
                    == .orderedAscending
            else { return false }
            logger.notice(
                "metadata BLOB loaded from the cache",
                metadata: ["no": .stringConvertible(blob.serial ?? 0), "entries": .stringConvertible(blob.entries.count)])
            if let next = blob.nextUpdate, now > next {
                logger.warning("the cached metadata BLOB is past its nextUpdate; it is used until a newer one is fetched")
            }
            await onInstall(blob)
            return true
        } catch {
            logger.warning("the cached metadata BLOB is not used", metadata: ["code": .string(error.code.rawValue), "reason": .string(error.message)])
            return false
        }
    }

    func readValidators(_ directory: String, matching bytes: [UInt8]) -> Validators {
        let path = (directory as NSString).appendingPathComponent(Self.validatorsName)
        guard let data = AtomicFile.read(path, limit: 4096),
            let json = try? JSONValue.parse(data, limits: JSONLimits(maxBytes: 4096, maxDepth: 2)),
            json["sha256"]?.stringValue == Base64URL.encode(Digest.sha256(bytes))
        else { return Validators() }
        return Validators(etag: json["etag"]?.stringValue, lastModified: json["lastModified"]?.stringValue)
    }

    /// Writes the BLOB, then its validators, each to a temporary file renamed into place.
    func writeCache(_ bytes: [UInt8], validators: Validators) {
        guard let directory = configuration.cacheDirectory else { return }
        var sidecar: JSONObject = ["sha256": .string(Base64URL.encode(Digest.sha256(bytes)))]
        if let etag = validators.etag { sidecar["etag"] = .string(etag) }
        if let modified = validators.lastModified { sidecar["lastModified"] = .string(modified) }
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            try AtomicFile.save(bytes, to: (directory as NSString).appendingPathComponent(Self.cacheName))
            try AtomicFile.save(JSONValue.object(sidecar).serializedBytes(), to: (directory as NSString).appendingPathComponent(Self.validatorsName))
        } catch {
            logger.warning("the metadata BLOB could not be cached", metadata: ["directory": .string(directory), "reason": .string("\(error)")])
        }
    }
}
