"""`yokebot demo`: the README's story on any machine. A demo agent reads a bundled sample nginx log (502s from an
upstream that went away), so "check the recent nginx error logs; if something's wrong, push it to the team
channel" works without nginx: the tail, the 502s, the alert, the answer, and `yokebot trace` afterwards."""
