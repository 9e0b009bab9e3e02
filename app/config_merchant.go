package app

import (
	"crypto/subtle"
	"fmt"
	"strings"

	"github.com/payd/payd/handler"
)

// merchantConfig is the merchant's keys (ADR 0058): PAYD_MERCHANT_KEY,
// audited as merchant:default, and the named PAYD_MERCHANT_KEYS, for
// rotation and for several of the merchant's systems.
type merchantConfig struct {
	MerchantKey  string // PAYD_MERCHANT_KEY: sk_...
	MerchantKeys string // PAYD_MERCHANT_KEYS: name:sk_...,name:sk_...

	merchants []handler.Merchant // MerchantKeys, parsed by checkMerchants
}

// merchantKeyPrefix starts every merchant key: a key is told from the
// other bearer credentials at a glance, in a config file or a leak report.
const merchantKeyPrefix = "sk_"

func (c *Config) merchantSettings() []setting {
	return []setting{
		{"PAYD_MERCHANT_KEY", "merchant-key", "", "the merchant's key sk_...: the catalogue's writes (audited as merchant:default)", &c.MerchantKey, nil},
		{"PAYD_MERCHANT_KEYS", "merchant-keys", "", "named merchant keys name:sk_...,name:sk_... beside PAYD_MERCHANT_KEY (rotation, several systems); the audit's actor is merchant:NAME", &c.MerchantKeys, nil},
	}
}

// checkMerchants parses PAYD_MERCHANT_KEYS and holds every merchant key to
// its rules: sk_..., in production strong, and in every environment its
// holder's own: a key that is also an admin token, another merchant key or
// any other secret payd holds would make one credential two callers.
// Errors name an entry by its position and name, never its key.
// PAYD_MERCHANT_KEY itself is made up or required by check, as the other
// secrets are.
func (c *Config) checkMerchants(sub string) error {
	if sub == "sandbox" || sub == "migrate" {
		return nil
	}
	keys := map[string]string{}
	if c.MerchantKey != "" {
		if !strings.HasPrefix(c.MerchantKey, merchantKeyPrefix) {
			return fmt.Errorf("PAYD_MERCHANT_KEY must start with %s", merchantKeyPrefix)
		}
		keys[c.MerchantKey] = "PAYD_MERCHANT_KEY"
	}
	if strings.TrimSpace(c.MerchantKeys) != "" {
		names := map[string]bool{}
		entries := strings.Split(c.MerchantKeys, ",")
		for i, entry := range entries {
			name, key, ok := strings.Cut(strings.TrimSpace(entry), ":")
			where := fmt.Sprintf("PAYD_MERCHANT_KEYS entry %d of %d", i+1, len(entries))
			switch {
			case !ok || !operatorName.MatchString(name):
				return fmt.Errorf("%s must be name:sk_... with a name of 1-32 letters, digits, '.', '_' or '-'", where)
			case strings.EqualFold(name, handler.DefaultMerchant):
				return fmt.Errorf("%s: the name %q is PAYD_MERCHANT_KEY's; choose another", where, name)
			case names[strings.ToLower(name)]:
				return fmt.Errorf("%s: merchant key %q is named twice", where, name)
			case !strings.HasPrefix(key, merchantKeyPrefix) || strings.ContainsAny(key, " \t,:"):
				return fmt.Errorf("%s (%s) must be a key sk_... without spaces, commas or colons", where, name)
			case keys[key] != "":
				return fmt.Errorf("%s (%s) has the same key as %s: each merchant key needs its own", where, name, keys[key])
			}
			if c.Env == "production" && (weakSecret(key) || lowEntropy([]byte(key))) {
				return fmt.Errorf("%s (%s) must be a strong key (sk_ and 24+ random characters, not a placeholder or a repeated pattern) when PAYD_ENV=production", where, name)
			}
			names[strings.ToLower(name)] = true
			keys[key] = "merchant key " + name
			c.merchants = append(c.merchants, handler.Merchant{Name: name, Key: key})
		}
	}
	return c.merchantKeysAlone(keys)
}

// merchantKeysAlone refuses a merchant key that is also another of
// payd's secrets, naming both settings, never the key.
func (c *Config) merchantKeysAlone(keys map[string]string) error {
	others := c.heldSecrets(heldSecret{"PAYD_ADMIN_TOKEN", c.AdminToken}, heldSecret{"PAYD_SECRET_KEY", c.SecretKey},
		heldSecret{"PAYD_NOTIFY_SECRET", c.NotifySecret}, heldSecret{"STRIPE_SECRET_KEY", c.Stripe.SecretKey})
	for key, which := range keys {
		for _, o := range others {
			if o.val != "" && subtle.ConstantTimeCompare([]byte(o.val), []byte(key)) == 1 {
				return fmt.Errorf("%s must differ from %s: each secret has its own holder", which, o.name)
			}
		}
	}
	return nil
}
