// TrustGet URL... [NAME: VALUE]...: a GET of each URL, in turn, with
// java.net.http.HttpClient, as an agent's Java tool makes it, trusting
// what the JVM's default SSLContext trusts (javax.net.ssl.trustStore and
// the rest, e.g. from JAVA_TOOL_OPTIONS); every NAME: VALUE goes on every
// request. Prints "STATUS n URL" and the body of each, and exits 0; at
// the first failure prints "ERROR URL" and each cause (class: message)
// and exits 1. For e2e proxy_trust_stores: compiled by the scenario (the
// JDK), run by the JRE.
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

public class TrustGet {
	public static void main(String[] args) {
		List<String> urls = new ArrayList<>();
		List<String> heads = new ArrayList<>();
		for (String a : args)
			(a.startsWith("http") ? urls : heads).add(a);
		HttpClient c = HttpClient.newBuilder()
		    .connectTimeout(Duration.ofSeconds(8))
		    .build();
		for (String u : urls) {
			try {
				HttpRequest.Builder b = HttpRequest.newBuilder()
				    .uri(URI.create(u))
				    .timeout(Duration.ofSeconds(8));
				for (String h : heads) {
					int k = h.indexOf(':');
					b.header(h.substring(0, k).trim(),
					    h.substring(k + 1).trim());
				}
				HttpResponse<String> r = c.send(b.build(),
				    HttpResponse.BodyHandlers.ofString());
				System.out.println("STATUS " + r.statusCode() +
				    " " + u);
				System.out.println(r.body());
			} catch (Exception e) {
				System.out.println("ERROR " + u);
				for (Throwable t = e; t != null;
				    t = t.getCause())
					System.out.println(t.getClass().getName() +
					    ": " + t.getMessage());
				System.exit(1);
			}
		}
		System.exit(0);
	}
}
