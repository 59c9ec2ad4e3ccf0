package spend

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
)

// Price is a model's price in micro-dollars per million tokens.
type Price struct {
	InputPerMTok, OutputPerMTok Micros
}

// Usage is what a call used (or may use, for a reservation) and its cost.
type Usage struct {
	InputTokens, OutputTokens int64
	Cost                      Micros
}

// Tokens returns input plus output tokens.
func (u Usage) Tokens() int64 { return u.InputTokens + u.OutputTokens }

// Unit is what a daily quota counts.
type Unit string

// The quota units.
const (
	UnitTokens Unit = "tokens"
	UnitUSD    Unit = "usd"
)

// Quota is a per-caller daily limit: Limit tokens, or Limit micro-dollars.
type Quota struct {
	Unit  Unit
	Limit int64
}

// Of returns the amount of u this quota counts.
func (q Quota) Of(u Usage) int64 {
	if q.Unit == UnitUSD {
		return int64(u.Cost)
	}
	return u.Tokens()
}

// Config is the spend configuration: the price table and the optional
// per-caller daily quota.
type Config struct {
	prices map[string]Price
	// Quota is nil when no daily quota is configured.
	Quota *Quota
}

// The configuration document, decoded strictly.
type configDoc struct {
	Models     map[string]*priceDoc `json:"models"`
	DailyQuota *quotaDoc            `json:"daily_quota"`
}

type priceDoc struct {
	Input  *json.Number `json:"input_usd_per_mtok"`
	Output *json.Number `json:"output_usd_per_mtok"`
}

type quotaDoc struct {
	Tokens *json.Number `json:"tokens"`
	USD    *json.Number `json:"usd"`
}

// ParseConfig parses the spend configuration strictly:
//
//	{"models": {"<model id>": {"input_usd_per_mtok": 3, "output_usd_per_mtok": 15}},
//	 "daily_quota": {"usd": 25}}            // or {"tokens": 2000000}; optional
//
// Prices are plain decimals (at most 6 decimals), read exactly, never as
// floats. Unknown fields, missing prices, negative or exponent numbers,
// trailing data and an empty model table are *ConfigError.
func ParseConfig(data []byte) (*Config, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	var doc configDoc
	if err := dec.Decode(&doc); err != nil {
		return nil, &ConfigError{Field: "", Problem: "not a valid spend configuration document: " + err.Error()}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, &ConfigError{Field: "", Problem: "trailing data after the document"}
	}
	if len(doc.Models) == 0 {
		return nil, &ConfigError{Field: "models", Problem: "at least one model price is required"}
	}
	c := &Config{prices: map[string]Price{}}
	for m, p := range doc.Models {
		f := "models." + m
		if strings.TrimSpace(m) == "" || len(m) > 256 {
			return nil, &ConfigError{Field: f, Problem: "model id must be 1..256 non-blank bytes"}
		}
		if p == nil || p.Input == nil || p.Output == nil {
			return nil, &ConfigError{Field: f, Problem: "input_usd_per_mtok and output_usd_per_mtok are both required"}
		}
		in, err := ParseUSD(p.Input.String())
		if err != nil {
			return nil, &ConfigError{Field: f + ".input_usd_per_mtok", Problem: err.Error()}
		}
		out, err := ParseUSD(p.Output.String())
		if err != nil {
			return nil, &ConfigError{Field: f + ".output_usd_per_mtok", Problem: err.Error()}
		}
		c.prices[m] = Price{InputPerMTok: in, OutputPerMTok: out}
	}
	if q := doc.DailyQuota; q != nil {
		switch {
		case (q.Tokens == nil) == (q.USD == nil):
			return nil, &ConfigError{Field: "daily_quota", Problem: `exactly one of "tokens" or "usd" is required`}
		case q.Tokens != nil:
			n, err := q.Tokens.Int64()
			if err != nil || n <= 0 {
				return nil, &ConfigError{Field: "daily_quota.tokens", Problem: fmt.Sprintf("%q is not a positive whole number", q.Tokens.String())}
			}
			c.Quota = &Quota{Unit: UnitTokens, Limit: n}
		default:
			m, err := ParseUSD(q.USD.String())
			if err != nil || m <= 0 {
				return nil, &ConfigError{Field: "daily_quota.usd", Problem: fmt.Sprintf("%q is not a positive dollar amount with at most 6 decimals", q.USD.String())}
			}
			c.Quota = &Quota{Unit: UnitUSD, Limit: int64(m)}
		}
	}
	return c, nil
}

// Models returns the priced model ids, sorted.
func (c *Config) Models() []string {
	out := make([]string, 0, len(c.prices))
	for m := range c.prices {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}

// Price returns model's price, or *UnknownModelError.
func (c *Config) Price(model string) (Price, error) {
	p, ok := c.prices[model]
	if !ok {
		return Price{}, &UnknownModelError{Model: model}
	}
	return p, nil
}

// Usage prices a usage of model: the cost is rounded up to the micro-dollar.
// Use it with the provider's reported tokens after a call, and with the
// call's maximum (input + max output tokens) for its reservation.
// Errors: *UnknownModelError, negative tokens, overflow.
func (c *Config) Usage(model string, inputTokens, outputTokens int64) (Usage, error) {
	p, err := c.Price(model)
	if err != nil {
		return Usage{}, err
	}
	if inputTokens < 0 || outputTokens < 0 {
		return Usage{}, fmt.Errorf("spend: negative token count (%d, %d)", inputTokens, outputTokens)
	}
	cost, err := costMicros(inputTokens, outputTokens, p.InputPerMTok, p.OutputPerMTok)
	if err != nil {
		return Usage{}, err
	}
	return Usage{InputTokens: inputTokens, OutputTokens: outputTokens, Cost: cost}, nil
}
