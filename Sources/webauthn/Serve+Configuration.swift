import ArgumentParser
import Foundation
import Logging
import SignInWithApple
import WebAuthnCore
import WebAuthnMetadata
import WebAuthnServer
import _WebAuthnEncoding
import _WebAuthnCrypto
import _WebAuthnHTTP

// `webauthn serve`: what its flags make (the metadata service, Sign in with Apple, the secret,
// the algorithms), apart from running the server.
extension Serve {
    /// The metadata service of `--mds-url`, installing into `engine`; nil without the flag.
    func metadataService(
        engine: WebAuthnEngine, staticSerial: Int?, logger: Logger, onInstall: @escaping @Sendable (FIDOMetadata) async -> Void
    ) throws -> MetadataService? {
        guard let mdsURL, let url = URL(string: mdsURL) else { return nil }
        var verification = try trust.blobOptions()
        // Nothing fetched may be older than the BLOBs given as files (their entries would be replaced).
        verification.minimumSerial = staticSerial ?? 0
        if let mdsRoot {
            guard let bytes = AtomicFile.read(mdsRoot, limit: maxCertificateFile) else {
                throw ValidationError("cannot read \(mdsRoot) (or it is larger than \(maxCertificateFile / 1024) KiB)")
            }
            let text = String(decoding: bytes, as: UTF8.self)
            do { verification.roots = [try X509Certificate(pem: text)] } catch { throw ValidationError("--mds-root: \(error.message)") }
        }
        var metadataLogger = logger
        metadataLogger[metadataKey: "component"] = "metadata"
        var configuration = MetadataService.Configuration(url: url, verification: verification, cacheDirectory: mdsCache)
        if !trust.metadataCRLs.isEmpty {
            // Read again before each verification: a CRL past its nextUpdate fails every BLOB, and
            // the operator replaces the files without a restart. One that cannot be read keeps the last set.
            let paths = trust.metadataCRLs
            let last = Locked(verification.crls)
            configuration.revocationLists = { [metadataLogger] in
                do {
                    let lists = try MetadataOptions.revocationLists(paths)
                    last.withLock { $0 = lists }
                    return lists
                } catch {
                    metadataLogger.warning("the --metadata-crl files could not be read again; the last ones read are used", metadata: ["reason": "\(error)"])
                    return last.withLock { $0 }
                }
            }
        }
        do {
            return try MetadataService(
                configuration: configuration, engine: engine, logger: metadataLogger, onInstall: onInstall)
        } catch {
            throw ValidationError("--mds-url: \(error.message)")
        }
    }

    /// The proxy the server's `https` fetches go through (`HTTPS_PROXY`, `NO_PROXY`), when it
    /// fetches anything (`--mds-url`, a `--passkey-providers` URL, Sign in with Apple); a setting
    /// that cannot be used stops the server rather than letting every fetch fail later.
    func fetchProxy() throws -> CappedHTTP.Proxy? {
        let providersURL = passkeyProviders.map { $0.hasPrefix("https://") || $0.hasPrefix("http://") } ?? false
        guard mdsURL != nil || providersURL || !appleClientIDs.isEmpty || appleServicesID != nil else { return nil }
        do { return try CappedHTTP.environmentProxy.get() } catch { throw ValidationError(error.message) }
    }

    /// Sign in with Apple from the `--apple-*` flags; nil when no client id is given.
    func appleConfiguration() throws -> SignInWithAppleConfiguration? {
        let clientIDs = appleClientIDs + (appleServicesID.map { [$0] } ?? [])
        guard !clientIDs.isEmpty else {
            guard appleTeamID == nil, appleKeyID == nil, applePrivateKey == nil, appleRedirectURI == nil, appleBaseURL == nil else {
                throw ValidationError("the --apple-* flags need --apple-client-id or --apple-services-id")
            }
            return nil
        }
        guard let teamID = appleTeamID, let keyID = appleKeyID, let keyPath = applePrivateKey else {
            throw ValidationError("Sign in with Apple needs --apple-team-id, --apple-key-id and --apple-private-key (the code exchange signs a client secret)")
        }
        guard (appleServicesID == nil) == (appleRedirectURI == nil) else {
            throw ValidationError("the web flow needs both --apple-services-id and --apple-redirect-uri")
        }
        guard let contents = AtomicFile.read(keyPath, limit: 16 * 1024) else {
            throw ValidationError("--apple-private-key \(keyPath) cannot be read (or is larger than 16 KiB)")
        }
        let base = appleBaseURL.flatMap(URL.init(string:)) ?? SignInWithAppleConfiguration.defaultBaseURL
        guard base.scheme == "https" || base.host == "127.0.0.1" || base.host == "localhost" else {
            throw ValidationError("--apple-base-url must be https (or loopback, for a stand-in)")
        }
        do {
            let credentials = try AppleClientCredentials(
                teamID: teamID, keyID: keyID, privateKey: ApplePrivateKey(pem: String(decoding: contents, as: UTF8.self)))
            return try SignInWithAppleConfiguration(clientIDs: clientIDs, credentials: credentials, baseURL: base)
        } catch {
            throw ValidationError("Sign in with Apple: \(error.message)")
        }
    }

    /// A warning for each file that holds the server secret or the sessions (the SQLite database,
    /// its WAL and shared memory, `--secret-file`) and that its group or other users may read or
    /// write: whoever reads the secret can forge session cookies (operator review, helper 72). New
    /// databases are created owner-only; this finds older ones, secret files made with the default
    /// umask, and a WAL left with another mode. Links are resolved: SQLite keeps the WAL beside
    /// the file a link points to.
    func warnAboutReadableSecrets(_ logger: Logger) {
        var files: [(what: String, path: String, holds: String)] = []
        if !isPostgres {
            let path = URL(fileURLWithPath: String(db.dropFirst("sqlite:".count))).resolvingSymlinksInPath().path
            let holds =
                secretFile == nil && ProcessInfo.processInfo.environment["WEBAUTHN_SECRET"] == nil ? "the server secret and the sessions" : "the sessions"
            for file in [path, path + "-wal", path + "-shm"] { files.append(("the database file", file, holds)) }
        }
        if let secretFile { files.append(("--secret-file", secretFile, "the server secret")) }
        for file in files {
            var status = stat()
            guard stat(file.path, &status) == 0, status.st_mode & 0o077 != 0 else { continue }
            logger.warning(
                "\(file.what) \(file.path) is open to other users (mode \(String(status.st_mode & 0o777, radix: 8))); it holds \(file.holds): chmod 600 \(file.path)"
            )
        }
        if trustedProxies.contains(where: { CIDR($0)?.holdsEveryAddress == true }) {
            logger.warning("a --trusted-proxy range is /0: every client's X-Forwarded-For is believed, so any client can pose as any address")
        }
    }

    /// The server secret: `--secret-file`, else WEBAUTHN_SECRET, else nil (random). A file of
    /// text (UTF-8) is trimmed of surrounding whitespace; any other file is its bytes, as they
    /// are. Red team, thirty-first pass: a binary file was decoded as text, every invalid byte
    /// the same replacement character, so different secrets became one and 11 bytes of 0xFF
    /// passed the 32-byte minimum as 33.
    func secret() throws -> [UInt8]? {
        let bytes: [UInt8]
        if let secretFile {
            guard let contents = AtomicFile.read(secretFile, limit: 4096) else {
                throw ValidationError("--secret-file \(secretFile) cannot be read (or is larger than 4 KiB)")
            }
            if let text = String(validating: contents, as: UTF8.self) {
                bytes = Array(text.trimmingCharacters(in: .whitespacesAndNewlines).utf8)
            } else {
                bytes = contents
            }
        } else if let env = ProcessInfo.processInfo.environment["WEBAUTHN_SECRET"] {
            bytes = Array(env.trimmingCharacters(in: .whitespacesAndNewlines).utf8)
        } else {
            return nil
        }
        guard bytes.count >= 32 else {
            throw ValidationError("the server secret must be at least 32 bytes (for example 43 base64 characters from openssl rand -base64 32)")
        }
        return bytes
    }

    /// `--algorithms`: COSE algorithm names (RS1 is never offered).
    static func parseAlgorithms(_ list: String?) throws -> [COSEAlgorithm]? {
        guard let list else { return nil }
        var result: [COSEAlgorithm] = []
        for name in list.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) {
            if let pq = COSEAlgorithm.postQuantum.first(where: { $0.name.caseInsensitiveCompare(name) == .orderedSame }) {
                // ML-DSA: offered only when the linked OpenSSL verifies it.
                guard MLDSAParameterSet.available else {
                    throw ValidationError("--algorithms: \(pq.name) needs OpenSSL 3.5 or newer; this process runs \(OpenSSL.versionText)")
                }
                if !result.contains(pq) { result.append(pq) }
                continue
            }
            guard let alg = COSEAlgorithm.supported.first(where: { $0.name.caseInsensitiveCompare(name) == .orderedSame }), alg != .rs1 else {
                throw ValidationError(
                    "--algorithms: unknown or refused algorithm \"\(name)\"; use \(COSEAlgorithm.supported.filter { $0 != .rs1 }.map(\.name).joined(separator: ","))"
                )
            }
            if !result.contains(alg) { result.append(alg) }
        }
        guard !result.isEmpty else { throw ValidationError("--algorithms is empty") }
        return result
    }
}
