package spend

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"
)

// Micros is an amount of money in micro-US-dollars (1e-6 USD). Sums of
// money are always integer; there is no float on any path.
type Micros int64

// MicrosPerUSD is one dollar.
const MicrosPerUSD Micros = 1_000_000

// ParseUSD parses a plain decimal dollar amount ("15", "0.25", "3.000001")
// exactly. At most 6 fractional digits; no sign, exponent or spaces.
func ParseUSD(s string) (Micros, error) {
	whole, frac, hasDot := strings.Cut(s, ".")
	if whole == "" || (hasDot && frac == "") || len(frac) > 6 || !digits(whole) || !digits(frac) {
		return 0, fmt.Errorf("%q is not a plain decimal dollar amount with at most 6 decimals", s)
	}
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || w > int64(maxUSD) {
		return 0, fmt.Errorf("%q is larger than %d dollars", s, maxUSD)
	}
	f := int64(0)
	if frac != "" {
		f, _ = strconv.ParseInt(frac+strings.Repeat("0", 6-len(frac)), 10, 64)
	}
	return Micros(w)*MicrosPerUSD + Micros(f), nil
}

// maxUSD caps parsed amounts so products with token counts stay exact.
const maxUSD = 1_000_000_000

func digits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// String formats m as dollars with 6 decimals ("0.012345").
func (m Micros) String() string {
	sign := ""
	if m < 0 {
		sign, m = "-", -m
	}
	return fmt.Sprintf("%s%d.%06d", sign, m/MicrosPerUSD, m%MicrosPerUSD)
}

// costMicros returns ceil((in*pin + out*pout) / 1e6): the cost of a usage
// in micro-dollars, rounded up (budgets err on the safe side).
func costMicros(in, out int64, pin, pout Micros) (Micros, error) {
	a := new(big.Int).Mul(big.NewInt(in), big.NewInt(int64(pin)))
	b := new(big.Int).Mul(big.NewInt(out), big.NewInt(int64(pout)))
	a.Add(a, b)
	a.Add(a, big.NewInt(999_999))
	a.Quo(a, big.NewInt(1_000_000))
	if !a.IsInt64() {
		return 0, fmt.Errorf("spend: cost of %d+%d tokens overflows", in, out)
	}
	return Micros(a.Int64()), nil
}
