internal import Foundation
package import _WebAuthnEncoding

/// The `credentials` table of the SQL stores (SQLite and PostgreSQL): one
/// codec between a row and a ``CredentialRecord``, so both stores name the
/// same columns, in the same order, with the same meaning.
package enum CredentialColumn: String, CaseIterable, Sendable {
    case id
    case userHandle = "user_handle"
    case publicKey = "public_key"
    case signCount = "sign_count"
    /// Comma-separated; empty for none.
    case transports
    case uvInitialized = "uv_initialized"
    case backupEligible = "backup_eligible"
    case backupState = "backup_state"
    case aaguid
    case attestationFormat = "attestation_format"
    /// Seconds since 1970.
    case createdAt = "created_at"
    /// Seconds since 1970; NULL when never used.
    case lastUsedAt = "last_used_at"
    /// The owner's name for it; NULL for none.
    case name
    /// ``CredentialProperties`` as JSON text (`{}` when nothing was reported).
    case properties
    /// The attestation certificates, as a CBOR array of DER byte strings (empty: none).
    case attestationChain = "attestation_chain"
    /// ``CredentialFlag`` as JSON text; NULL when not flagged.
    case flag

    /// Every column, comma-separated, in declaration order (for `SELECT` and `INSERT`).
    package static let list = allCases.map(\.rawValue).joined(separator: ", ")
    /// The columns qualified by a table alias (`c.id, c.user_handle, …`); each result column keeps its own name.
    package static func qualifiedList(_ alias: String) -> String { allCases.map { "\(alias).\($0.rawValue)" }.joined(separator: ", ") }
    /// ``qualifiedList(_:)`` for the alias `c`, built once.
    package static let listOfC = qualifiedList("c")
}

/// The tables (and their columns) that make a database one of this server's, in either store:
/// what a tool that must not take over another application's database (`webauthn metadata audit`)
/// checks before it opens one. Another application's tables of the same names lack these columns.
package enum StoreSchema {
    package static let tables: [(name: String, columns: [String])] = [
        ("credentials", CredentialColumn.allCases.map(\.rawValue)),
        ("challenges", ["challenge", "ceremony", "expires_at", "binding"]),
        ("accounts", ["name", "handle", "display_name", "name_key", "capitals_key"]),
        ("sessions", ["id_hash", "user_handle", "created_at", "authenticated_at", "expires_at"]),
    ]

    /// A database whose schema is newer than the build's: an older build skipped every migration
    /// it knew and served on rules it does not keep.
    package static func newerThanBuild(_ version: Int, latest: Int) -> WebAuthnError {
        WebAuthnError(.storageFailure, "the database is at schema version \(version), newer than this build's \(latest): run a build at least as new")
    }

    /// A `schema_version` row whose version is not an integer (`type` is what it is): no
    /// version this store wrote, so no database it can migrate.
    package static func versionNotInteger(_ type: String, in database: String = "the database") -> WebAuthnError {
        WebAuthnError(
            .storageFailure,
            "\(database)'s schema_version holds a version of type \(type.prefix(16)), not an integer: not a database of this server; its content was not changed"
        )
    }

    /// A database that a tool which migrates nothing found at another version than the build's.
    package static func otherVersion(_ found: String, latest: Int) -> WebAuthnError {
        WebAuthnError(.storageFailure, "the database is at schema version \(found), this build's is \(latest): run this build's webauthn serve with it once")
    }
}

/// A value to bind for one column; each store maps it to its own parameter type.
package enum CredentialColumnValue: Sendable, Equatable {
    case bytes([UInt8])
    case integer(Int64)
    case text(String)
    case double(Double)
    case bool(Bool)
    case null
}

/// A result row as a SQL store reads it. Every accessor throws
/// `storage_failure` for a missing column, a NULL or a value of another type;
/// none traps on what the database holds.
package protocol CredentialRowReader {
    func bytes(_ column: String) throws(WebAuthnError) -> [UInt8]
    func integer(_ column: String) throws(WebAuthnError) -> Int64
    func text(_ column: String) throws(WebAuthnError) -> String
    func double(_ column: String) throws(WebAuthnError) -> Double
    func bool(_ column: String) throws(WebAuthnError) -> Bool
    func isNull(_ column: String) -> Bool
}

extension CredentialRowReader {
    /// The `storage_failure` for an unreadable column.
    package func unreadable(_ column: String, _ why: String = "is NULL or of another type") -> WebAuthnError {
        WebAuthnError(.storageFailure, "column \(column) \(why)")
    }
}

extension CredentialRecord {
    /// Credential keys already imported, shared by every SQL store of the process.
    package static let keyCache = COSEKeyCache()

    /// Reads a row that has every ``CredentialColumn``. Throws
    /// `storage_failure` for an unreadable value, such as a counter outside
    /// `UInt32` or an AAGUID that is not 16 bytes.
    package init(row: some CredentialRowReader) throws(WebAuthnError) {
        func name(_ c: CredentialColumn) -> String { c.rawValue }
        let count = try row.integer(name(.signCount))
        guard let signCount = UInt32(exactly: count) else {
            throw row.unreadable(name(.signCount), "holds \(count), outside 0...\(UInt32.max)")
        }
        guard let aaguid = AAGUID(bytes: try row.bytes(name(.aaguid))) else { throw row.unreadable(name(.aaguid), "is not 16 bytes") }
        let transports = try row.text(name(.transports))
        let lastUsedAt: Date? = row.isNull(name(.lastUsedAt)) ? nil : Date(timeIntervalSince1970: try row.double(name(.lastUsedAt)))
        let label: String? = row.isNull(name(.name)) ? nil : try row.text(name(.name))
        let propertiesText = try row.text(name(.properties))
        // Bounded, shallow JSON the engine wrote; anything unreadable is no properties rather than a lost credential.
        let properties = (try? JSONValue.parse(propertiesText, limits: JSONLimits(maxBytes: 4096, maxDepth: 2))).map(CredentialProperties.init(json:))
        let chainBytes = try row.bytes(name(.attestationChain))
        guard let chain = Self.chain(chainBytes) else { throw row.unreadable(name(.attestationChain), "is not a CBOR array of byte strings") }
        // A flag that cannot be read still flags the credential: read as none, it let the
        // credential sign in as unflagged (red team, seventeenth pass).
        let flag: CredentialFlag? =
            row.isNull(name(.flag))
            ? nil
            : (try? JSONValue.parse(try row.text(name(.flag)), limits: JSONLimits(maxBytes: 4096, maxDepth: 2))).flatMap(CredentialFlag.init(json:))
                ?? .unreadable
        self.init(
            id: try row.bytes(name(.id)), userHandle: try row.bytes(name(.userHandle)),
            publicKey: try Self.keyCache.key(try row.bytes(name(.publicKey))), signCount: signCount,
            transports: transports.isEmpty ? [] : transports.split(separator: ",").map { AuthenticatorTransport(rawValue: String($0)) },
            uvInitialized: try row.bool(name(.uvInitialized)), backupEligible: try row.bool(name(.backupEligible)),
            backupState: try row.bool(name(.backupState)), aaguid: aaguid,
            attestationFormat: AttestationFormat(rawValue: try row.text(name(.attestationFormat))),
            createdAt: Date(timeIntervalSince1970: try row.double(name(.createdAt))), lastUsedAt: lastUsedAt, name: label,
            properties: properties ?? CredentialProperties(), attestationChain: chain, flag: flag)
    }

    /// The certificates of an `attestation_chain` value: at most 8, each at most 16 KiB.
    static func chain(_ bytes: [UInt8]) -> [[UInt8]]? {
        guard !bytes.isEmpty else { return [] }
        guard let value = try? CBORDecoder.decode(bytes), let items = value.arrayValue, items.count <= 8 else { return nil }
        var chain: [[UInt8]] = []
        for item in items {
            guard let der = item.bytesValue, der.count <= 16 * 1024 else { return nil }
            chain.append(der)
        }
        return chain
    }

    /// The value this record stores in `column`.
    package func value(of column: CredentialColumn) -> CredentialColumnValue {
        switch column {
        case .id: .bytes(id)
        case .userHandle: .bytes(userHandle)
        case .publicKey: .bytes(publicKey.bytes)
        case .signCount: .integer(Int64(signCount))  // UInt32 always fits
        case .transports: .text(transports.map(\.rawValue).joined(separator: ","))
        case .uvInitialized: .bool(uvInitialized)
        case .backupEligible: .bool(backupEligible)
        case .backupState: .bool(backupState)
        case .aaguid: .bytes(aaguid.bytes)
        case .attestationFormat: .text(attestationFormat.rawValue)
        case .createdAt: .double(createdAt.timeIntervalSince1970)
        case .lastUsedAt: lastUsedAt.map { .double($0.timeIntervalSince1970) } ?? .null
        case .name: name.map { .text($0) } ?? .null
        case .properties: .text(properties.json.serialized())
        case .attestationChain: .bytes(CBOREncoder.encode(.array(attestationChain.map { .bytes($0) })))
        case .flag: flag.map { .text($0.json.serialized()) } ?? .null
        }
    }

    /// The values of `columns` (by default every column, in the order of ``CredentialColumn/list``), for an `INSERT`.
    package func values(_ columns: [CredentialColumn] = CredentialColumn.allCases) -> [CredentialColumnValue] {
        columns.map(value(of:))
    }
}

extension CredentialRecord {
    /// A stable serialized form (UTF-8 JSON: one member per column of the SQL stores, bytes in
    /// base64url), for stores of your own: every field round-trips, a credential's flag included
    /// (a store that dropped it would let a revoked authenticator sign in again). An adopter's
    /// review: only `PendingCeremony` had one, and a store on another database had to invent a format.
    public var serialized: [UInt8] {
        var o: JSONObject = ["v": 1]
        for column in CredentialColumn.allCases {
            o[column.rawValue] =
                switch value(of: column) {
                case .bytes(let bytes): .string(Base64URL.encode(bytes))
                case .integer(let value): .number(Double(value))
                case .text(let text): .string(text)
                case .double(let value): .number(value)
                case .bool(let value): .bool(value)
                case .null: .null
                }
        }
        return Array(JSONValue.object(o).serialized().utf8)
    }

    /// Reads what ``serialized`` wrote, with the checks a SQL store's row gets (a counter within
    /// `UInt32`, a 16-byte AAGUID, a flag that cannot be read still flags). Throws
    /// `storage_failure` on anything else.
    public init(serialized bytes: [UInt8]) throws(WebAuthnError) {
        let value: JSONValue
        do { value = try JSONValue.parse(bytes, limits: JSONLimits(maxBytes: 1 << 20, maxDepth: 4)) } catch {
            throw WebAuthnError(.storageFailure, "stored credential: not JSON (\(error.code))")
        }
        guard value["v"]?.intValue == 1, let object = value.objectValue else { throw WebAuthnError(.storageFailure, "stored credential: unreadable") }
        try self.init(row: SerializedRow(object: object))
    }
}

/// ``CredentialRecord/serialized`` read as a row of the SQL stores.
struct SerializedRow: CredentialRowReader {
    let object: JSONObject

    func member(_ column: String) throws(WebAuthnError) -> JSONValue {
        guard let value = object[column], !value.isNull else { throw unreadable(column) }
        return value
    }
    func bytes(_ column: String) throws(WebAuthnError) -> [UInt8] {
        guard let bytes = try member(column).stringValue.flatMap(Base64URL.decode) else { throw unreadable(column) }
        return bytes
    }
    func integer(_ column: String) throws(WebAuthnError) -> Int64 {
        guard let number = try member(column).numberValue, let value = Int64(exactly: number) else { throw unreadable(column) }
        return value
    }
    func text(_ column: String) throws(WebAuthnError) -> String {
        guard let text = try member(column).stringValue else { throw unreadable(column) }
        return text
    }
    func double(_ column: String) throws(WebAuthnError) -> Double {
        guard let number = try member(column).numberValue, number.isFinite else { throw unreadable(column) }
        return number
    }
    func bool(_ column: String) throws(WebAuthnError) -> Bool {
        guard let value = try member(column).boolValue else { throw unreadable(column) }
        return value
    }
    func isNull(_ column: String) -> Bool { object[column]?.isNull ?? true }
}
