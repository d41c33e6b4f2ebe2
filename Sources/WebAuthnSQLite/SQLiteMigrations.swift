internal import WebAuthnCore
internal import _WebAuthnEncoding

/// The schema, versioned in one place. A migration runs once, in order, in a
/// transaction with the version bump; never edit one that has shipped.
enum SQLiteMigrations {
    static let migrations: [(version: Int, statements: [String])] = [
        (
            1,
            [
                """
                CREATE TABLE accounts (
                    name TEXT PRIMARY KEY,
                    handle BLOB NOT NULL UNIQUE,
                    display_name TEXT NOT NULL
                )
                """,
                """
                CREATE TABLE credentials (
                    id BLOB PRIMARY KEY,
                    user_handle BLOB NOT NULL,
                    public_key BLOB NOT NULL,
                    sign_count INTEGER NOT NULL,
                    transports TEXT NOT NULL,
                    uv_initialized INTEGER NOT NULL,
                    backup_eligible INTEGER NOT NULL,
                    backup_state INTEGER NOT NULL,
                    aaguid BLOB NOT NULL,
                    attestation_format TEXT NOT NULL,
                    created_at REAL NOT NULL,
                    last_used_at REAL
                )
                """,
                "CREATE INDEX credentials_by_user ON credentials (user_handle)",
                """
                CREATE TABLE challenges (
                    challenge BLOB PRIMARY KEY,
                    ceremony TEXT NOT NULL,
                    expires_at REAL NOT NULL
                )
                """,
            ]
        ),
        // Accounts unique by look-alike key and created only with their first
        // credential (one statement through the view's trigger); ceremonies
        // bound to a session, at most 8 per binding, swept through an index on
        // expiry; signed-in sessions shared by every process.
        (
            2,
            [
                "ALTER TABLE accounts ADD COLUMN name_key TEXT",
                "CREATE UNIQUE INDEX accounts_by_key ON accounts (name_key)",
                "ALTER TABLE challenges ADD COLUMN binding BLOB",
                "CREATE INDEX challenges_by_expiry ON challenges (expires_at)",
                "CREATE INDEX challenges_by_binding ON challenges (binding, expires_at)",
                """
                CREATE TRIGGER challenges_per_binding AFTER INSERT ON challenges WHEN NEW.binding IS NOT NULL BEGIN
                    DELETE FROM challenges WHERE binding = NEW.binding AND challenge NOT IN (
                        SELECT challenge FROM challenges WHERE binding = NEW.binding ORDER BY expires_at DESC, rowid DESC LIMIT \(PendingCeremony.maxPerBinding));
                END
                """,
                """
                CREATE TABLE sessions (
                    id_hash BLOB PRIMARY KEY,
                    user_handle BLOB NOT NULL,
                    created_at REAL NOT NULL,
                    authenticated_at REAL NOT NULL,
                    expires_at REAL NOT NULL
                )
                """,
                "CREATE INDEX sessions_by_user ON sessions (user_handle, created_at)",
                "CREATE INDEX sessions_by_expiry ON sessions (expires_at)",
                """
                CREATE TRIGGER sessions_per_user AFTER INSERT ON sessions BEGIN
                    DELETE FROM sessions WHERE user_handle = NEW.user_handle AND id_hash NOT IN (
                        SELECT id_hash FROM sessions WHERE user_handle = NEW.user_handle ORDER BY created_at DESC, rowid DESC LIMIT \(SignedInSession.maxPerUser));
                END
                """,
                """
                CREATE VIEW new_accounts AS SELECT
                    a.name AS name, a.name_key AS name_key, a.handle AS handle, a.display_name AS display_name,
                    c.id AS id, c.public_key AS public_key, c.sign_count AS sign_count, c.transports AS transports,
                    c.uv_initialized AS uv_initialized, c.backup_eligible AS backup_eligible, c.backup_state AS backup_state,
                    c.aaguid AS aaguid, c.attestation_format AS attestation_format, c.created_at AS created_at, c.last_used_at AS last_used_at
                FROM accounts a JOIN credentials c ON c.user_handle = a.handle
                """,
                """
                CREATE TRIGGER new_accounts_insert INSTEAD OF INSERT ON new_accounts BEGIN
                    INSERT INTO accounts (name, name_key, handle, display_name) VALUES (NEW.name, NEW.name_key, NEW.handle, NEW.display_name);
                    INSERT INTO credentials (id, user_handle, public_key, sign_count, transports, uv_initialized, backup_eligible, backup_state,
                                             aaguid, attestation_format, created_at, last_used_at)
                    VALUES (NEW.id, NEW.handle, NEW.public_key, NEW.sign_count, NEW.transports, NEW.uv_initialized, NEW.backup_eligible,
                            NEW.backup_state, NEW.aaguid, NEW.attestation_format, NEW.created_at, NEW.last_used_at);
                END
                """,
            ]
        ),
        // Settings the server keeps with its data, such as a generated server secret.
        (
            3,
            [
                "CREATE TABLE settings (name TEXT PRIMARY KEY, value BLOB NOT NULL)"
            ]
        ),
        // Identities linked from other providers (Sign in with Apple), unique by
        // provider and subject; an account created with its first identity in one
        // statement (the view's trigger), as with its first credential; deleting an
        // account deletes its credentials, identities and sessions in the same statement.
        (
            4,
            [
                """
                CREATE TABLE identities (
                    provider TEXT NOT NULL,
                    subject TEXT NOT NULL,
                    user_handle BLOB NOT NULL,
                    email TEXT,
                    email_verified INTEGER,
                    is_private_email INTEGER,
                    refresh_token BLOB,
                    created_at REAL NOT NULL,
                    updated_at REAL NOT NULL,
                    PRIMARY KEY (provider, subject)
                )
                """,
                "CREATE INDEX identities_by_user ON identities (user_handle, created_at)",
                """
                CREATE VIEW new_identity_accounts AS SELECT
                    a.name AS name, a.name_key AS name_key, a.handle AS handle, a.display_name AS display_name,
                    i.provider AS provider, i.subject AS subject, i.email AS email, i.email_verified AS email_verified,
                    i.is_private_email AS is_private_email, i.refresh_token AS refresh_token, i.created_at AS created_at, i.updated_at AS updated_at
                FROM accounts a JOIN identities i ON i.user_handle = a.handle
                """,
                """
                CREATE TRIGGER new_identity_accounts_insert INSTEAD OF INSERT ON new_identity_accounts BEGIN
                    INSERT INTO accounts (name, name_key, handle, display_name) VALUES (NEW.name, NEW.name_key, NEW.handle, NEW.display_name);
                    INSERT INTO identities (provider, subject, user_handle, email, email_verified, is_private_email, refresh_token, created_at, updated_at)
                    VALUES (NEW.provider, NEW.subject, NEW.handle, NEW.email, NEW.email_verified, NEW.is_private_email, NEW.refresh_token,
                            NEW.created_at, NEW.updated_at);
                END
                """,
                """
                CREATE TRIGGER accounts_delete AFTER DELETE ON accounts BEGIN
                    DELETE FROM credentials WHERE user_handle = OLD.handle;
                    DELETE FROM identities WHERE user_handle = OLD.handle;
                    DELETE FROM sessions WHERE user_handle = OLD.handle;
                END
                """,
            ]
        ),
        // A sign-in's writes in one statement (one commit, one fsync): the challenge consumed
        // and the counter compare-and-set, through the view's trigger; either check failing
        // aborts the whole statement (SQLITE_CONSTRAINT_TRIGGER) and changes nothing.
        (
            5,
            [
                """
                CREATE VIEW sign_in_commits AS SELECT
                    c.challenge AS challenge, r.id AS id, r.sign_count AS expected_sign_count, r.sign_count AS sign_count,
                    r.backup_state AS backup_state, r.uv_initialized AS uv_initialized, r.last_used_at AS last_used_at
                FROM challenges c JOIN credentials r ON 0
                """,
                """
                CREATE TRIGGER sign_in_commits_insert INSTEAD OF INSERT ON sign_in_commits BEGIN
                    SELECT RAISE(ABORT, 'no ceremony under this challenge') WHERE NOT EXISTS (SELECT 1 FROM challenges WHERE challenge = NEW.challenge);
                    SELECT RAISE(ABORT, 'the counter changed')
                        WHERE NOT EXISTS (SELECT 1 FROM credentials WHERE id = NEW.id AND sign_count = NEW.expected_sign_count);
                    DELETE FROM challenges WHERE challenge = NEW.challenge;
                    UPDATE credentials SET sign_count = NEW.sign_count, backup_state = NEW.backup_state, uv_initialized = NEW.uv_initialized,
                        last_used_at = NEW.last_used_at WHERE id = NEW.id;
                END
                """,
            ]
        ),
        // The owner's name for a credential, and what its registration established (credProps, credProtect, PRF, ...).
        (
            6,
            [
                "ALTER TABLE credentials ADD COLUMN name TEXT",
                "ALTER TABLE credentials ADD COLUMN properties TEXT NOT NULL DEFAULT '{}'",
                // The first credential of a new account carries them too.
                "DROP TRIGGER new_accounts_insert",
                "DROP VIEW new_accounts",
                """
                CREATE VIEW new_accounts AS SELECT
                    a.name AS name, a.name_key AS name_key, a.handle AS handle, a.display_name AS display_name,
                    c.id AS id, c.public_key AS public_key, c.sign_count AS sign_count, c.transports AS transports,
                    c.uv_initialized AS uv_initialized, c.backup_eligible AS backup_eligible, c.backup_state AS backup_state,
                    c.aaguid AS aaguid, c.attestation_format AS attestation_format, c.created_at AS created_at, c.last_used_at AS last_used_at,
                    c.name AS credential_name, c.properties AS properties
                FROM accounts a JOIN credentials c ON c.user_handle = a.handle
                """,
                """
                CREATE TRIGGER new_accounts_insert INSTEAD OF INSERT ON new_accounts BEGIN
                    INSERT INTO accounts (name, name_key, handle, display_name) VALUES (NEW.name, NEW.name_key, NEW.handle, NEW.display_name);
                    INSERT INTO credentials (id, user_handle, public_key, sign_count, transports, uv_initialized, backup_eligible, backup_state,
                                             aaguid, attestation_format, created_at, last_used_at, name, properties)
                    VALUES (NEW.id, NEW.handle, NEW.public_key, NEW.sign_count, NEW.transports, NEW.uv_initialized, NEW.backup_eligible,
                            NEW.backup_state, NEW.aaguid, NEW.attestation_format, NEW.created_at, NEW.last_used_at, NEW.credential_name,
                            NEW.properties);
                END
                """,
            ]
        ),
        // What a re-audit needs: the attestation certificates a credential was registered with,
        // and the flag an audit sets when metadata reports its authenticator compromised.
        (
            7,
            [
                "ALTER TABLE credentials ADD COLUMN attestation_chain BLOB NOT NULL DEFAULT x''",
                "ALTER TABLE credentials ADD COLUMN flag TEXT",
                "DROP TRIGGER new_accounts_insert",
                "DROP VIEW new_accounts",
                """
                CREATE VIEW new_accounts AS SELECT
                    a.name AS name, a.name_key AS name_key, a.handle AS handle, a.display_name AS display_name,
                    c.id AS id, c.public_key AS public_key, c.sign_count AS sign_count, c.transports AS transports,
                    c.uv_initialized AS uv_initialized, c.backup_eligible AS backup_eligible, c.backup_state AS backup_state,
                    c.aaguid AS aaguid, c.attestation_format AS attestation_format, c.created_at AS created_at, c.last_used_at AS last_used_at,
                    c.name AS credential_name, c.properties AS properties, c.attestation_chain AS attestation_chain, c.flag AS flag
                FROM accounts a JOIN credentials c ON c.user_handle = a.handle
                """,
                """
                CREATE TRIGGER new_accounts_insert INSTEAD OF INSERT ON new_accounts BEGIN
                    INSERT INTO accounts (name, name_key, handle, display_name) VALUES (NEW.name, NEW.name_key, NEW.handle, NEW.display_name);
                    INSERT INTO credentials (id, user_handle, public_key, sign_count, transports, uv_initialized, backup_eligible, backup_state,
                                             aaguid, attestation_format, created_at, last_used_at, name, properties, attestation_chain, flag)
                    VALUES (NEW.id, NEW.handle, NEW.public_key, NEW.sign_count, NEW.transports, NEW.uv_initialized, NEW.backup_eligible,
                            NEW.backup_state, NEW.aaguid, NEW.attestation_format, NEW.created_at, NEW.last_used_at, NEW.credential_name,
                            NEW.properties, NEW.attestation_chain, NEW.flag);
                END
                """,
            ]
        ),
        // Deleting an account also drops the ceremonies pending under its sessions' bindings: a
        // registration started by the account's session and finished after the deletion found its
        // challenge and stored a credential for an account that no longer existed (red team). The
        // ceremony goes in the deletion's statement, so the registration's consumption fails, or
        // it committed first and the credential goes with the account.
        (
            8,
            [
                "DROP TRIGGER accounts_delete",
                """
                CREATE TRIGGER accounts_delete AFTER DELETE ON accounts BEGIN
                    DELETE FROM challenges WHERE binding IN (SELECT id_hash FROM sessions WHERE user_handle = OLD.handle);
                    DELETE FROM credentials WHERE user_handle = OLD.handle;
                    DELETE FROM identities WHERE user_handle = OLD.handle;
                    DELETE FROM sessions WHERE user_handle = OLD.handle;
                END
                """,
            ]
        ),
        // A session that ends (signed out, signed out everywhere, rotated at a sign-in, expired,
        // beyond the per-account cap, its account deleted) takes the ceremonies pending under its
        // binding with it: an addition started before a sign-out could be finished after it with
        // the old cookie, and signed in (red team, fifth pass).
        (
            9,
            [
                """
                CREATE TRIGGER sessions_delete AFTER DELETE ON sessions BEGIN
                    DELETE FROM challenges WHERE binding = OLD.id_hash;
                END
                """
            ]
        ),
        // Look-alike keys computed again: the table of look-alikes grew (Lisu, Cherokee). Every key
        // is first made unique and unlike any name's key (names have no spaces), so that no key computed again can
        // meet an old one; a key two accounts share is suffixed (with a space) for the later one.
        (10, ["UPDATE accounts SET name_key = 'migrating ' || rowid"]),
        // Again: the keys are UTS #39 skeletons (`UserName+Skeleton.swift`, red team, eighth pass);
        // and a second unique key, the name's in capitals (`UserName.capitalsKey`), so that names
        // whose capitals look unlike their small letters (`Борис`, `борис`) are one account. The
        // views that create an account with its first credential or identity take it too.
        (
            11,
            [
                "UPDATE accounts SET name_key = 'migrating ' || rowid",
                "ALTER TABLE accounts ADD COLUMN capitals_key TEXT",
                "CREATE UNIQUE INDEX accounts_by_capitals_key ON accounts (capitals_key)",
                "DROP VIEW IF EXISTS new_accounts",
                """
                CREATE VIEW new_accounts AS SELECT
                    a.name AS name, a.name_key AS name_key, a.capitals_key AS capitals_key, a.handle AS handle, a.display_name AS display_name,
                    c.id AS id, c.public_key AS public_key, c.sign_count AS sign_count, c.transports AS transports,
                    c.uv_initialized AS uv_initialized, c.backup_eligible AS backup_eligible, c.backup_state AS backup_state,
                    c.aaguid AS aaguid, c.attestation_format AS attestation_format, c.created_at AS created_at, c.last_used_at AS last_used_at,
                    c.name AS credential_name, c.properties AS properties, c.attestation_chain AS attestation_chain, c.flag AS flag
                FROM accounts a JOIN credentials c ON c.user_handle = a.handle
                """,
                """
                CREATE TRIGGER new_accounts_insert INSTEAD OF INSERT ON new_accounts BEGIN
                    INSERT INTO accounts (name, name_key, capitals_key, handle, display_name)
                    VALUES (NEW.name, NEW.name_key, NEW.capitals_key, NEW.handle, NEW.display_name);
                    INSERT INTO credentials (id, user_handle, public_key, sign_count, transports, uv_initialized, backup_eligible, backup_state,
                                             aaguid, attestation_format, created_at, last_used_at, name, properties, attestation_chain, flag)
                    VALUES (NEW.id, NEW.handle, NEW.public_key, NEW.sign_count, NEW.transports, NEW.uv_initialized, NEW.backup_eligible,
                            NEW.backup_state, NEW.aaguid, NEW.attestation_format, NEW.created_at, NEW.last_used_at, NEW.credential_name,
                            NEW.properties, NEW.attestation_chain, NEW.flag);
                END
                """,
                "DROP VIEW IF EXISTS new_identity_accounts",
                """
                CREATE VIEW new_identity_accounts AS SELECT
                    a.name AS name, a.name_key AS name_key, a.capitals_key AS capitals_key, a.handle AS handle, a.display_name AS display_name,
                    i.provider AS provider, i.subject AS subject, i.email AS email, i.email_verified AS email_verified,
                    i.is_private_email AS is_private_email, i.refresh_token AS refresh_token, i.created_at AS created_at, i.updated_at AS updated_at
                FROM accounts a JOIN identities i ON i.user_handle = a.handle
                """,
                """
                CREATE TRIGGER new_identity_accounts_insert INSTEAD OF INSERT ON new_identity_accounts BEGIN
                    INSERT INTO accounts (name, name_key, capitals_key, handle, display_name)
                    VALUES (NEW.name, NEW.name_key, NEW.capitals_key, NEW.handle, NEW.display_name);
                    INSERT INTO identities (provider, subject, user_handle, email, email_verified, is_private_email, refresh_token, created_at, updated_at)
                    VALUES (NEW.provider, NEW.subject, NEW.handle, NEW.email, NEW.email_verified, NEW.is_private_email, NEW.refresh_token,
                            NEW.created_at, NEW.updated_at);
                END
                """,
            ]
        ),
        // Whether the provider delivers mail to the identity's email (Apple's email-disabled and
        // email-enabled), and when the last such change was dated, so that one delivered late
        // changes nothing. The view that creates an account with its first identity takes both.
        (
            12,
            [
                "ALTER TABLE identities ADD COLUMN email_enabled INTEGER",
                "ALTER TABLE identities ADD COLUMN email_changed_at REAL",
                "DROP VIEW IF EXISTS new_identity_accounts",
                """
                CREATE VIEW new_identity_accounts AS SELECT
                    a.name AS name, a.name_key AS name_key, a.capitals_key AS capitals_key, a.handle AS handle, a.display_name AS display_name,
                    i.provider AS provider, i.subject AS subject, i.email AS email, i.email_verified AS email_verified,
                    i.is_private_email AS is_private_email, i.email_enabled AS email_enabled, i.email_changed_at AS email_changed_at,
                    i.refresh_token AS refresh_token, i.created_at AS created_at, i.updated_at AS updated_at
                FROM accounts a JOIN identities i ON i.user_handle = a.handle
                """,
                """
                CREATE TRIGGER new_identity_accounts_insert INSTEAD OF INSERT ON new_identity_accounts BEGIN
                    INSERT INTO accounts (name, name_key, capitals_key, handle, display_name)
                    VALUES (NEW.name, NEW.name_key, NEW.capitals_key, NEW.handle, NEW.display_name);
                    INSERT INTO identities (provider, subject, user_handle, email, email_verified, is_private_email, email_enabled, email_changed_at,
                                            refresh_token, created_at, updated_at)
                    VALUES (NEW.provider, NEW.subject, NEW.handle, NEW.email, NEW.email_verified, NEW.is_private_email, NEW.email_enabled,
                            NEW.email_changed_at, NEW.refresh_token, NEW.created_at, NEW.updated_at);
                END
                """,
            ]
        ),
        // The per-binding and per-user caps only when a cap is passed: a count through the index
        // first (the trigger's WHEN), and the rows beyond the newest read from that index, not
        // sorted in a temporary B-tree for every insert (the old form was half a session's insert).
        (
            13,
            [
                "DROP TRIGGER challenges_per_binding",
                """
                CREATE TRIGGER challenges_per_binding AFTER INSERT ON challenges
                WHEN NEW.binding IS NOT NULL AND (SELECT COUNT(*) FROM challenges WHERE binding = NEW.binding) > \(PendingCeremony.maxPerBinding) BEGIN
                    DELETE FROM challenges WHERE rowid IN (
                        SELECT rowid FROM challenges WHERE binding = NEW.binding ORDER BY expires_at DESC, rowid DESC LIMIT -1 OFFSET \(PendingCeremony.maxPerBinding));
                END
                """,
                "DROP TRIGGER sessions_per_user",
                """
                CREATE TRIGGER sessions_per_user AFTER INSERT ON sessions
                WHEN (SELECT COUNT(*) FROM sessions WHERE user_handle = NEW.user_handle) > \(SignedInSession.maxPerUser) BEGIN
                    DELETE FROM sessions WHERE rowid IN (
                        SELECT rowid FROM sessions WHERE user_handle = NEW.user_handle ORDER BY created_at DESC, rowid DESC LIMIT -1 OFFSET \(SignedInSession.maxPerUser));
                END
                """,
            ]
        ),
    ]
}
