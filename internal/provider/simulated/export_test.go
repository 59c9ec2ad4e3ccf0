package simulated

// SetOnWait installs a hook called when a Generate call starts waiting
// (latency, jitter or Slow), so tests can cancel a call mid-flight without
// sleeping.
func SetOnWait(p *Provider, f func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.onWait = f
}
